"""One conformance suite for every LLM engine available on this machine.

llama.cpp in-process, the OpenAI-compatible HTTP client against a real local llama_cpp.server,
the simulated engine and the replica router (over two simulated engines) all answer the same questions: streaming order, stop strings, max
tokens, abort mid-stream, greedy determinism, a batch of mixed lengths, and per-request errors.
Small max_new_tokens keep the suite fast on 2 cores.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import pytest

from ragraph.errors import EngineError, PromptTooLong
from ragraph.ir import Sampling
from ragraph.runtime.llm import GenerationRequest, LLMEngine, create_engine
from tests.llm.conftest import SERVER_N_CTX
from tests.real import need_module

PROMPT = "The history of the city of Paris begins"
PROMPTS = [
    "Water boils at a temperature of",
    "The first president of the United States was",
    "In 1969, the Apollo 11 mission",
    "Photosynthesis is the process by which green plants",
]
Factory = Callable[[], LLMEngine]


# The real-model engines are slow tests (make test-all); the simulated one runs in make test.
@pytest.fixture(params=[pytest.param("llamacpp", marks=pytest.mark.slow),
                        pytest.param("http", marks=pytest.mark.slow),
                        pytest.param("llama-server", marks=pytest.mark.slow), "sim", "replicas"])
def make_engine(request: pytest.FixtureRequest) -> Factory:
    kind = request.param
    if kind == "llamacpp":
        from ragraph.runtime.llm.llamacpp.engine import LlamaCppConfig

        path = request.getfixturevalue("model_path")
        cfg = LlamaCppConfig(model_path=path, context_length=512)
        return lambda: create_engine("llamacpp", cfg)
    if kind in ("http", "llama-server"):  # llama_cpp.server, or llama.cpp's C++ server
        from ragraph.runtime.llm.http.openai import OpenAIHttpConfig

        url = request.getfixturevalue("llama_server" if kind == "http"
                                      else "fresh_llama_server_cpp")
        cfg = OpenAIHttpConfig(base_url=url, context_length=SERVER_N_CTX)
        return lambda: create_engine("openai", cfg)
    from ragraph.runtime.llm.sim.engine import SimConfig

    # Real clock: a simulated step is ~6 ms of asyncio.sleep.
    sim = SimConfig(context_length=512, output_lengths=(40,))
    if kind == "replicas":
        from ragraph.runtime.distributed.replicas import ReplicaRouter

        return lambda: ReplicaRouter([create_engine("sim", sim) for _ in range(2)])
    return lambda: create_engine("sim", sim)


def req(rid: str, prompt: str = PROMPT, n: int = 12, **kw: object) -> GenerationRequest:
    return GenerationRequest(rid, prompt=prompt, params=Sampling(max_tokens=n, **kw))


def run(make_engine: Factory, body: Callable[[LLMEngine], object]) -> object:
    async def main() -> object:
        async with make_engine() as engine:
            return await body(engine)  # type: ignore[misc]

    return asyncio.run(main())


async def collect(engine: LLMEngine, r: GenerationRequest) -> tuple[list, object]:
    stream = engine.submit(r)
    events = [e async for e in stream]
    return events, await stream.result()


def test_streaming_order_matches_result(make_engine: Factory) -> None:
    async def body(engine: LLMEngine) -> None:
        assert isinstance(engine, LLMEngine)
        events, result = await collect(engine, req("a", logprobs=True))
        assert "".join(e.text for e in events) == result.text
        assert result.text.strip()
        ids = [e.token_id for e in events if e.token_id is not None]
        assert tuple(ids) == result.token_ids
        assert result.logprobs is not None and all(lp <= 0 for lp in result.logprobs)
        assert result.completion_tokens >= 1 and result.prompt_tokens >= 1 or not ids
        assert engine.counters().completion_tokens >= result.completion_tokens

    run(make_engine, body)


def test_max_new_tokens_ends_with_length(make_engine: Factory) -> None:
    async def body(engine: LLMEngine) -> None:
        _, result = await collect(engine, req("a", n=5))
        assert result.finish_reason == "length"
        assert result.completion_tokens == 5

    run(make_engine, body)


def test_stop_string_cuts_output_before_it(make_engine: Factory) -> None:
    async def body(engine: LLMEngine) -> None:
        _, free = await collect(engine, req("free", n=16))
        text = free.text
        mid = len(text) // 2
        stop = text[mid : mid + 3]  # usually spans a token boundary
        events, stopped = await collect(engine, req("stopped", n=16, stop=(stop,)))
        assert stopped.finish_reason == "stop"
        assert stopped.text == text[: text.index(stop)]
        assert "".join(e.text for e in events) == stopped.text

    run(make_engine, body)


def test_greedy_decoding_is_deterministic(make_engine: Factory) -> None:
    async def body(engine: LLMEngine) -> None:
        _, first = await collect(engine, req("a"))
        _, second = await collect(engine, req("b"))
        assert first.text == second.text and first.token_ids == second.token_ids

    run(make_engine, body)


def test_batch_of_mixed_lengths(make_engine: Factory) -> None:
    """Concurrent requests with different prompts and limits each get their own answer."""

    async def body(engine: LLMEngine) -> None:
        solo = [(await collect(engine, req(f"s{i}", p, n=4 + 3 * i)))[1] for i, p in enumerate(PROMPTS)]
        streams = [engine.submit(req(f"b{i}", p, n=4 + 3 * i)) for i, p in enumerate(PROMPTS)]
        batched = [await s.result() for s in streams]
        # Batched numerics may flip a near-tie late in a sequence (measured and reported by
        # the benchmark): ragraph's own engines must agree on the first tokens. A server
        # batches as it sees fit, and llama-server's 4 slots flipped the second token once
        # ("In 1969, the Apollo 11 mission" went on " was launched" alone, " was the" beside
        # three others): there the client is under test, and each request must get its own
        # stream (its first word, its limit), never another's.
        for i, (a, b) in enumerate(zip(solo, batched, strict=True)):
            assert b.completion_tokens <= 4 + 3 * i
            assert b.finish_reason in ("stop", "length")
            if engine.batch_invariant:  # the engine promises it: the whole answer
                assert (b.text, b.token_ids) == (a.text, a.token_ids), (i, a.text, b.text)
            elif not engine.schedules_batches:
                assert b.text.split()[:1] == a.text.split()[:1], (i, a.text, b.text)
                assert all(b.text != o.text for j, o in enumerate(solo) if o.text != a.text)
            else:
                assert b.text[:8] == a.text[:8], (i, a.text, b.text)

    run(make_engine, body)


def test_abort_mid_stream_leaves_others_untouched(make_engine: Factory) -> None:
    async def body(engine: LLMEngine) -> None:
        _, alone = await collect(engine, req("alone", PROMPTS[0], n=10))
        keep = engine.submit(req("keep", PROMPTS[0], n=10))
        victim = engine.submit(req("victim", PROMPTS[1], n=40))
        seen = 0
        async for _ in victim:
            seen += 1
            if seen == 2:
                victim.abort()
        aborted = await victim.result()
        kept = await keep.result()
        assert aborted.finish_reason == "abort"
        assert aborted.completion_tokens < 40
        assert kept.finish_reason == alone.finish_reason
        assert kept.completion_tokens == alone.completion_tokens
        assert kept.text[:8] == alone.text[:8]  # see test_batch_of_mixed_lengths

    run(make_engine, body)


def test_empty_prompt_fails_only_its_request(make_engine: Factory) -> None:
    async def body(engine: LLMEngine) -> None:
        good = engine.submit(req("good", n=4))
        bad = engine.submit(req("bad", prompt=""))
        with pytest.raises(EngineError, match="empty prompt"):
            await bad.result()
        with pytest.raises(EngineError):
            [e async for e in bad]
        assert (await good.result()).completion_tokens >= 1

    run(make_engine, body)


def test_over_long_prompt_names_the_limit(make_engine: Factory) -> None:
    async def body(engine: LLMEngine) -> None:
        good = engine.submit(req("good", n=4))
        bad = engine.submit(req("long", prompt="lorem ipsum " * 1500))
        with pytest.raises(PromptTooLong) as err:  # the request's mistake (kind "input")
            await bad.result()
        assert str(engine.context_length) in str(err.value)
        assert "tokens" in str(err.value)
        if engine.name.startswith("llamacpp"):  # 512 here; Gemma-3-270M reads up to 32,768
            assert "raise `ctx` (--ctx" in str(err.value)
        assert (await good.result()).completion_tokens >= 1
        # The engine keeps serving after the failure.
        assert (await engine.submit(req("after", n=3)).result()).completion_tokens >= 1

    run(make_engine, body)


def test_an_id_in_flight_cannot_be_reused_until_its_stream_ends(make_engine: Factory) -> None:
    async def body(engine: LLMEngine) -> None:
        first = engine.submit(req("same", n=8))
        with pytest.raises(EngineError, match="already in flight"):
            engine.submit(req("same", n=2))
        first.abort()  # an aborted stream stays in flight until the engine ends it
        await first.result(raise_on_error=False)
        again = engine.submit(req("same", n=2))
        assert (await again.result()).completion_tokens >= 1

    run(make_engine, body)


def test_submit_before_start_is_a_clear_error(make_engine: Factory) -> None:
    with pytest.raises(EngineError, match="not running"):
        make_engine().submit(req("early", n=2))


# -- errors specific to one engine kind --------------------------------------------------------


def test_llamacpp_unknown_model_path_is_a_clear_error() -> None:
    need_module("llama_cpp")
    from ragraph.runtime.llm.llamacpp.engine import LlamaCppConfig

    async def main() -> None:
        await create_engine("llamacpp", LlamaCppConfig(model_path="/nonexistent/model.gguf")).start()

    with pytest.raises(EngineError, match="/nonexistent/model.gguf"):
        asyncio.run(main())


def test_http_server_down_fails_the_request() -> None:
    from ragraph.runtime.llm.http.openai import OpenAIHttpConfig
    from tests.llm.conftest import free_port

    cfg = OpenAIHttpConfig(base_url=f"http://127.0.0.1:{free_port()}", connect_timeout_s=2)

    async def main() -> None:
        async with create_engine("openai", cfg) as engine:
            await engine.submit(req("a")).result()

    with pytest.raises(EngineError, match="127.0.0.1"):
        asyncio.run(main())


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"<html>502 Bad Gateway</html>\n", "not server-sent events"),
        (b"data: {\"choices\": 7}\n\n", "choices"),
        (b"data: {\"choices\": [{\"text\": \" a\"}]}\n\n", "DONE"),
    ],
)
def test_http_garbage_fails_only_that_request(body: bytes, match: str) -> None:
    from ragraph.runtime.llm.http.openai import OpenAIHttpConfig
    from tests.llm.fakeserver import FakeServer, sse

    good = sse({"choices": [{"text": " ok", "finish_reason": None}]},
               {"choices": [{"text": "", "finish_reason": "stop"}]})

    async def main() -> tuple[str, str]:
        async with FakeServer(lambda r: (200, body if r["prompt"] == "bad" else good)) as srv:
            async with create_engine("openai", OpenAIHttpConfig(base_url=srv.url)) as engine:
                bad = engine.submit(req("bad", prompt="bad"))
                ok = engine.submit(req("ok", prompt="fine"))
                with pytest.raises(EngineError) as err:
                    await bad.result()
                return str(err.value), (await ok.result()).text

    message, text = asyncio.run(main())
    assert re.search(match, message)
    assert text == " ok"
