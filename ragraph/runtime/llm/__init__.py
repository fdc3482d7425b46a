"""LLM engines behind one async streaming protocol (see `protocol`).

    from ragraph.runtime.llm import create_engine, GenerationRequest, SamplingParams
    async with create_engine("llamacpp") as engine:
        stream = engine.submit(GenerationRequest("q1", prompt="Paris is", params=SamplingParams(8)))
        async for event in stream: ...
        result = await stream.result()
"""

from ragraph.runtime.llm.protocol import (
    EngineCounters,
    GenerationRequest,
    GenerationResult,
    LLMEngine,
    SamplingParams,
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
    "SamplingParams",
    "TokenEvent",
    "create_engine",
]
