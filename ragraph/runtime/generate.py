"""Generation nodes on an LLM engine: the mapping from a Generate node to an engine request."""

from __future__ import annotations

import math

from ragraph.ir.nodes import Generate, Sampling
from ragraph.ir.values import GeneratedText
from ragraph.runtime.llm.chat import Prompt
from ragraph.runtime.llm.failure import error_of
from ragraph.runtime.llm.protocol import (
    GenerationRequest,
    GenerationResult,
    PromptSegments,
)
from ragraph.runtime.llm.stream import GenerationStream


def engine_request(rid: str, prompt: Prompt, params: Sampling,
                   layout: PromptSegments | None = None) -> GenerationRequest:
    """The engine request for completion text or a chat turn's messages."""
    if isinstance(prompt, str):
        return GenerationRequest(rid=rid, prompt=prompt, params=params, layout=layout)
    return GenerationRequest(rid=rid, messages=prompt, params=params, layout=layout)


def generation_request(rid: str, node: Generate, prompt: Prompt, attempt: int = 0,
                       branch: int | None = None) -> GenerationRequest:
    """Engine request ids are unique per (request, node, visit, attempt, map branch) so aborts
    hit one stream."""
    suffix = "" if branch is None else f".{branch}"
    return engine_request(f"{rid}/{node.id}/{attempt}{suffix}", prompt, node.sampling)


def generated_text(result: GenerationResult) -> GeneratedText:
    """The node's value: the text, carrying its least likely token's probability (FLARE); a
    failed generation raises its typed error (`failure.error_of`)."""
    error = error_of(result, f"generation {result.rid!r}")
    if error is not None:
        raise error
    min_prob = math.exp(min(result.logprobs)) if result.logprobs else 1.0
    return GeneratedText(result.text, min_prob)


async def finish(stream: GenerationStream) -> GenerationResult:
    """Drain a stream and return its result; a failed request raises its typed error."""
    async for _ in stream:
        pass
    return await stream.result()
