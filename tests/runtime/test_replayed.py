"""`serial_llamacpp.Replayed`, which spares the llama.cpp exactness tests the model time of a
prompt the serial engine already answered: a replay is the computed stream, event for event;
an aborted or failed generation is never replayed."""

from __future__ import annotations

import asyncio

from ragraph.runtime.llm.protocol import GenerationRequest, Sampling
from ragraph.runtime.llm.sim.engine import SimEngine
from tests.runtime.serial_llamacpp import Capped, Replayed
from tests.runtime.test_semantics import FAST


async def _stream(engine, rid: str, prompt: str, max_tokens: int = 8):  # noqa: ANN001, ANN202
    stream = engine.submit(GenerationRequest(rid=rid, prompt=prompt,
                                             params=Sampling(max_tokens=max_tokens)))
    events = [event async for event in stream]
    return events, await stream.result()


def test_an_identical_request_is_replayed_event_for_event() -> None:
    async def main():  # noqa: ANN202
        async with SimEngine(FAST) as sim:
            engine = Replayed(Capped(sim, 6))
            first = await _stream(engine, "a", "Who designed the Eiffel Tower?")
            again = await _stream(engine, "b", "Who designed the Eiffel Tower?")
            other = await _stream(engine, "c", "Who painted the Mona Lisa?")
            return engine, first, again, other

    engine, (events, result), (events2, result2), _ = asyncio.run(main())
    assert (engine.hits, engine.misses) == (1, 2)
    assert events2 == events and result2.token_ids == result.token_ids
    assert result2.text == result.text and result2.rid == "b" and result.rid == "a"


def test_a_request_that_differs_in_its_sampling_is_computed() -> None:
    async def main():  # noqa: ANN202
        async with SimEngine(FAST) as sim:
            engine = Replayed(Capped(sim, 20))
            short = await _stream(engine, "a", "Who wrote Pride and Prejudice?", max_tokens=3)
            long = await _stream(engine, "b", "Who wrote Pride and Prejudice?", max_tokens=9)
            return engine, short, long

    engine, (_, short), (_, long) = asyncio.run(main())
    assert (engine.hits, engine.misses) == (0, 2)
    assert len(long.token_ids) > len(short.token_ids)


def test_an_aborted_generation_is_never_replayed() -> None:
    async def main():  # noqa: ANN202
        async with SimEngine(FAST) as sim:
            engine = Replayed(Capped(sim, 50))
            request = GenerationRequest(rid="a", prompt="When did the Berlin Wall fall?",
                                        params=Sampling(max_tokens=50))
            stream = engine.submit(request)
            stream.abort()
            aborted = await stream.result(raise_on_error=False)
            await asyncio.sleep(0)  # the recorder's callback runs
            whole = await _stream(engine, "b", "When did the Berlin Wall fall?", max_tokens=50)
            return engine, aborted, whole

    engine, aborted, (_, whole) = asyncio.run(main())
    assert aborted.finish_reason == "abort"
    assert (engine.hits, engine.misses) == (0, 2)
    assert whole.finish_reason in ("stop", "length")
