"""How a generation's failure travels from an engine to the request that asked for it.

An engine ends a failed stream with an error result that says whose fault it is
(`GenerationResult.error_kind`); a consumer gets the matching exception back from `error_of`, so
a prompt over the model's context reaches the request as `PromptTooLong` (the client's mistake),
an upstream fault as `EngineError`, and a bug in ragraph's engine code as `EngineBug`. Upstream
servers name a context overflow in words only; `overflow` knows the ones they use.
"""

from __future__ import annotations

import logging
import re

from ragraph.errors import EngineError, PromptTooLong, RagraphError
from ragraph.runtime.llm.protocol import ErrorKind, GenerationResult

log = logging.getLogger(__name__)


class EngineBug(RuntimeError):
    """An engine failed a request for a reason neither the request nor the server explains (a
    bug in ragraph's engine code). Not a RagraphError: `failure_kind` calls it internal."""


def error_of(result: GenerationResult, where: str) -> Exception | None:
    """The exception a failed result stands for (None unless it failed); `where` leads the
    message (the request or node it belongs to)."""
    if result.finish_reason != "error":
        return None
    message = f"{where}: {result.error or 'generation failed'}"
    if result.error_kind == "input":
        return PromptTooLong(message)
    if result.error_kind == "internal":
        return EngineBug(message)
    return EngineError(message)


def kind_of(err: BaseException) -> ErrorKind:
    """Whose fault an exception raised while serving one request is, for its error result."""
    if isinstance(err, PromptTooLong):
        return "input"
    return "engine" if isinstance(err, RagraphError) else "internal"


def cause(err: Exception, engine: str) -> tuple[str, ErrorKind]:
    """The message and kind of the exception that ended one request of `engine`. Anything but
    ragraph's own errors is a bug: logged here, once, with its traceback."""
    if isinstance(err, RagraphError):
        return str(err), kind_of(err)
    log.error("%s: a request failed on an unexpected %s", engine, type(err).__name__,
              exc_info=err)
    return f"internal error: {type(err).__name__}: {err}", "internal"


# How servers say a prompt does not fit: vLLM and OpenAI ("This model's maximum context length
# is N tokens", code context_length_exceeded), SGLang ("The input (N tokens) is longer than the
# model's context length (M tokens)"; its scheduler: "Input length (N tokens) exceeds the
# maximum allowed length (M tokens)"), llama.cpp's server ("the request exceeds the available
# context size", type exceed_context_size_error), llama-cpp-python ("Requested tokens (N) exceed
# context window of M").
_OVERFLOW = re.compile(
    r"maximum context length|context_length_exceeded|longer than the model's context length"
    r"|exceeds the maximum allowed length|exceeds the available context size"
    r"|exceed_context_size|exceed context window", re.IGNORECASE)


def overflow(detail: str) -> bool:
    """Whether a server's error message says the prompt is longer than its context."""
    return _OVERFLOW.search(detail) is not None
