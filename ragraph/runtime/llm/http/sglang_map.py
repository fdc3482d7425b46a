"""Pure mapping between ragraph's protocol and SGLang's generate API (no sglang import).

SGLang's `Engine.async_generate(..., stream=True)` and the server's native `POST /generate`
(SSE, `data: {...}` lines ending with `data: [DONE]`) speak the same dicts:
request `text` or `input_ids`, `sampling_params` (`max_new_tokens`, `temperature`, `top_p`,
`stop`, `sampling_seed`), `return_logprob`, `rid`; each output chunk has `text`, `output_ids` and
`meta_info` (`prompt_tokens`, `completion_tokens`, `cached_tokens`, `finish_reason` as
`{"type": "stop"|"length"|"abort", ...}` or None, `output_token_logprobs` as
`[logprob, token_id, text]` triples). By default chunks are cumulative (the whole text so far);
with the server flag `--incremental-streaming-output` they are deltas.
"""

from __future__ import annotations

from typing import Any

from ragraph.errors import EngineError, PromptTooLong
from ragraph.ir import Sampling
from ragraph.runtime.llm.failure import overflow
from ragraph.runtime.llm.http.base import StreamState
from ragraph.runtime.llm.http.wire import count, malformed, real, whole
from ragraph.runtime.llm.protocol import GenerationRequest, TokenEvent


def sampling_params_dict(params: Sampling) -> dict[str, Any]:
    out: dict[str, Any] = {
        "max_new_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
    }
    if params.stop:
        out["stop"] = list(params.stop)
    if params.seed is not None:
        out["sampling_seed"] = params.seed
    return out


def generate_kwargs(request: GenerationRequest) -> dict[str, Any]:
    """Keyword arguments of `sglang.Engine.async_generate` (streaming)."""
    if request.messages is not None:
        # SGLang applies chat templates in its OpenAI layer only (`/v1/chat/completions`);
        # `generate` and `/generate` take text or token ids.
        raise EngineError("SGLang's generate API takes no chat turns: run SGLang's server and "
                          "use --engine openai --url URL, whose /v1/chat/completions renders "
                          "them with the model's chat template")
    kwargs: dict[str, Any] = {
        "sampling_params": sampling_params_dict(request.params),
        "return_logprob": request.params.logprobs,
        "stream": True,
        "rid": request.rid,
    }
    if request.prompt is not None:
        kwargs["prompt"] = request.prompt
    else:
        kwargs["input_ids"] = list(request.prompt_ids or ())
    return kwargs


def generate_payload(request: GenerationRequest) -> dict[str, Any]:
    """The JSON body of the native `POST /generate` (the server names the prompt `text`)."""
    kwargs = generate_kwargs(request)
    if "prompt" in kwargs:
        kwargs["text"] = kwargs.pop("prompt")
    return kwargs


class ChunkFolder:
    """Turns successive SGLang output chunks of one request into `TokenEvent`s."""

    def __init__(self, state: StreamState, incremental: bool = False) -> None:
        self.state = state
        self.incremental = incremental
        self._n_logprobs = 0

    def apply(self, chunk: dict[str, Any], we_aborted: bool = False) -> list[TokenEvent]:
        """Events for the tokens this chunk adds; `we_aborted` when the caller aborted the
        request (an abort is then the expected end, not a rejection)."""
        meta = chunk.get("meta_info")
        ids = chunk.get("output_ids")
        if not isinstance(meta, dict) or not isinstance(ids, list):
            raise malformed(f"SGLang chunk without meta_info/output_ids: {str(chunk)[:200]}")
        new_ids = [whole(t, "output_ids[]")
                   for t in (ids if self.incremental else ids[len(self.state.token_ids):])]
        text_delta = self._text_delta(chunk.get("text"))
        new_logprobs = self._logprobs(meta.get("output_token_logprobs"))
        self._apply_meta(meta, we_aborted)
        self.state.token_ids.extend(new_ids)
        self.state.text += text_delta
        events = [
            TokenEvent(t, text_delta if i == len(new_ids) - 1 else "",
                       new_logprobs[i] if i < len(new_logprobs) else None)
            for i, t in enumerate(new_ids)
        ]
        if not events and text_delta:
            events.append(TokenEvent(None, text_delta))
        return events

    def _text_delta(self, text: object) -> str:
        if text is None:
            return ""  # SGLang defers intermediate text in non-incremental mode
        if not isinstance(text, str):
            raise malformed(f"SGLang chunk text is not a string: {text!r:.100}")
        if self.incremental:
            return text
        if not text.startswith(self.state.text):
            raise malformed("SGLang cumulative text does not extend the previous chunk")
        return text[len(self.state.text):]

    def _logprobs(self, triples: object) -> list[float]:
        if not self.state.request.params.logprobs or not isinstance(triples, list):
            return []
        fresh = triples if self.incremental else triples[self._n_logprobs:]
        self._n_logprobs += len(fresh)
        values = [real(t[0], "output_token_logprobs[][0]") for t in fresh
                  if isinstance(t, list | tuple) and t]
        self.state.logprobs.extend(values)
        return values

    def _apply_meta(self, meta: dict[str, Any], we_aborted: bool) -> None:
        s = self.state
        s.prompt_tokens = count(meta, "prompt_tokens", "meta_info", s.prompt_tokens)
        s.completion_tokens = count(meta, "completion_tokens", "meta_info", s.completion_tokens)
        s.cached_tokens = count(meta, "cached_tokens", "meta_info", s.cached_tokens)
        reason = meta.get("finish_reason")
        if isinstance(reason, dict):
            kind = reason.get("type")
            if kind == "abort" and reason.get("message") and not we_aborted:
                # SGLang reports rejected requests (too long, bad params) as aborts with a message.
                message = f"SGLang rejected the request: {reason['message']}"
                if overflow(message):
                    raise PromptTooLong(message)
                raise EngineError(message)
            s.finish_reason = kind if kind in ("stop", "length", "abort") else "stop"
