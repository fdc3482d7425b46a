"""LLM engines behind one async streaming protocol (see `protocol`).

One subpackage per engine family: `llamacpp/` (embedded llama.cpp), `http/` (OpenAI-compatible
servers and SGLang) and `sim/` (the simulated engine with the measured profiles and cost model
it runs on); `registry` maps an engine kind to its classes.

    from ragraph.ir import Sampling
    from ragraph.runtime.llm import create_engine, GenerationRequest
    async with create_engine("llamacpp") as engine:
        request = GenerationRequest("q1", prompt="Paris is", params=Sampling(max_tokens=8))
        stream = engine.submit(request)
        async for event in stream: ...
        result = await stream.result()
"""

from ragraph.runtime.llm.protocol import (
    EngineCounters,
    GenerationRequest,
    GenerationResult,
    LLMEngine,
    TokenEvent,
)
from ragraph.runtime.llm.registry import ENGINE_KINDS, create_engine
from ragraph.runtime.llm.stream import GenerationStream

__all__ = [
    "ENGINE_KINDS",
    "EngineCounters",
    "GenerationRequest",
    "GenerationResult",
    "GenerationStream",
    "LLMEngine",
    "TokenEvent",
    "create_engine",
]
