"""An engine fault is never an empty answer: whatever goes wrong while an engine drives one request
(malformed upstream data, an HTTP error, a bug in our reading of the stream, the engine closing,
the engine stopping a request on its own, the simulator's step loop failing) ends that request's
stream with an error that names the engine and the cause, of the class that says whose fault it
is. Real sockets on loopback (tests/llm/fakeserver.py), no model."""

from __future__ import annotations

import asyncio
import logging

import pytest

from ragraph.errors import EngineError, PromptTooLong, failure_kind
from ragraph.ir import Sampling
from ragraph.runtime.llm.base import EngineBase
from ragraph.runtime.llm.failure import EngineBug
from ragraph.runtime.llm.http import openai as openai_http
from ragraph.runtime.llm.http.openai import OpenAIHttpConfig, OpenAIHttpEngine
from ragraph.runtime.llm.http.sglang import SGLangConfig, SGLangHttpEngine
from ragraph.runtime.llm.protocol import GenerationRequest, GenerationResult
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine
from ragraph.runtime.llm.stream import GenerationStream
from tests.llm.fakeserver import FakeServer, sse


def req(rid: str, prompt: str = "hello there", n: int = 4) -> GenerationRequest:
    return GenerationRequest(rid, prompt=prompt, params=Sampling(max_tokens=n))


def chunk(text: str, reason: str | None = None, **extra: object) -> dict:
    return {"choices": [{"text": text, "finish_reason": reason}], **extra}


GOOD = sse(chunk(" ok"), chunk("", "stop"))


async def outcome(engine, request: GenerationRequest) -> GenerationResult | BaseException:
    """The stream's result, or what it raised."""
    try:
        return await asyncio.wait_for(engine.submit(request).result(), 10)
    except Exception as err:  # the outcome under test
        return err


def served(body_for, make=None, *requests: GenerationRequest) -> list:  # noqa: ANN001
    make = make or (lambda url: OpenAIHttpEngine(OpenAIHttpConfig(base_url=url)))

    async def go() -> list:
        async with FakeServer(body_for) as srv, make(srv.url) as engine:
            return list(await asyncio.gather(*(outcome(engine, r) for r in requests)))

    return asyncio.run(go())


def test_malformed_usage_fails_the_request_and_names_engine_server_and_field():
    bad = sse(chunk(" a"), chunk("", "stop", usage={"prompt_tokens": "abc"}))
    got, ok = served(lambda r: (200, bad if r["prompt"] == "bad" else GOOD), None,
                     req("bad", "bad"), req("ok", "fine"))
    assert type(got) is EngineError, got
    assert "openai-http at http://127.0.0.1:" in str(got)
    assert "usage.prompt_tokens 'abc'" in str(got)
    assert ok.text == " ok"


@pytest.mark.parametrize("meta, field", [({"prompt_tokens": "abc"}, "meta_info.prompt_tokens"),
                                         ({"cached_tokens": [1]}, "meta_info.cached_tokens")])
def test_sglang_malformed_meta_fails_the_request(meta, field):
    body = sse({"text": " a", "output_ids": [5], "meta_info": {**meta, "finish_reason": None}})
    (got,) = served(lambda r: (200, body),
                    lambda url: SGLangHttpEngine(SGLangConfig(mode="http", base_url=url)),
                    req("r"))
    assert type(got) is EngineError and field in str(got), got


def test_a_bug_reading_the_stream_is_an_internal_error_logged_once(monkeypatch, caplog):
    real = openai_http.apply_completion_chunk

    def buggy(obj, state, *rest):  # noqa: ANN001
        if obj["choices"] and obj["choices"][0]["text"] == " boom":
            return {}["missing"]
        return real(obj, state, *rest)

    monkeypatch.setattr(openai_http, "apply_completion_chunk", buggy)
    boom = sse(chunk(" boom"), chunk("", "stop"))
    with caplog.at_level(logging.ERROR):
        got, ok = served(lambda r: (200, boom if r["prompt"] == "bad" else GOOD), None,
                         req("bad", "bad"), req("ok", "fine"))
    assert isinstance(got, EngineBug) and failure_kind(got) == "internal"
    assert "KeyError" in str(got) and "openai-http at" in str(got)
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [KeyError]
    assert ok.text == " ok"


@pytest.mark.parametrize("status, detail, kind", [
    (500, "Internal Server Error", EngineError),
    (400, "This model's maximum context length is 2048 tokens. However, you requested 60000 "
          "tokens (59936 in the messages, 64 in the completion).", PromptTooLong),
    (400, '{"error": {"type": "exceed_context_size_error", "n_ctx": 2048}}', PromptTooLong),
    (400, "temperature must be positive", EngineError),
])
def test_an_http_error_status_says_whose_fault_it_is(status, detail, kind):
    (got,) = served(lambda r: (status, detail.encode()), None, req("r"))
    assert type(got) is kind and f"HTTP {status}" in str(got), got


def test_a_dropped_stream_over_the_context_is_prompt_too_long():
    """Servers that check the length once streaming began just drop the stream: the engine
    counts the prompt with the server's tokenizer and says so."""
    def body_for(r: dict) -> tuple[int, bytes]:
        if "stream" not in r:  # the tokenize endpoint: one token a word
            return 200, f'{{"tokens": {list(range(len(r["prompt"].split())))}}}'.encode()
        return (200, GOOD) if len(r["prompt"]) < 100 else (200, sse(done=False))

    make = lambda url: OpenAIHttpEngine(OpenAIHttpConfig(base_url=url, context_length=512))  # noqa: E731
    got, ok = served(body_for, make, req("long", "word " * 600), req("ok", "fine"))
    assert type(got) is PromptTooLong, got
    assert "600 tokens" in str(got) and "512" in str(got)
    assert ok.text == " ok"


def test_closing_the_engine_mid_request_is_an_error_not_an_abort():
    async def go() -> BaseException | GenerationResult:
        hold = asyncio.Event()
        async with FakeServer(lambda r: (200, GOOD), hold=hold) as srv:
            engine = OpenAIHttpEngine(OpenAIHttpConfig(base_url=srv.url))
            await engine.start()
            stream = engine.submit(req("r"))
            while not srv.requests:  # the request reached the server
                await asyncio.sleep(0.01)
            await engine.close()
            hold.set()
            try:
                return await stream.result()
            except EngineError as err:
                return err

    got = asyncio.run(go())
    assert isinstance(got, EngineError) and "engine closed" in str(got), got


class QuitsOnItsOwn(EngineBase):
    """Ends every request with finish_reason abort, which nobody asked for."""

    def tokenize(self, text: str) -> tuple[int, ...]:
        return ()

    def _submit(self, request: GenerationRequest, stream: GenerationStream) -> None:
        asyncio.get_running_loop().call_soon(self._end, stream, GenerationResult(
            request.rid, "half an ans", (), "abort", 3, 0, 2))


def test_an_abort_nobody_asked_for_is_an_engine_error():
    async def go():
        async with QuitsOnItsOwn("quitter", 512) as engine:
            got = await outcome(engine, req("r"))
            asked = engine.submit(req("s"))
            asked.abort()
            return got, engine.counters()

    got, counters = asyncio.run(go())
    assert type(got) is EngineError and "quitter" in str(got) and "on its own" in str(got)
    assert counters.failed == 1


def test_an_abort_asked_for_is_an_abort():
    stream = GenerationStream("r", lambda _: None, "eng")
    stream.abort()
    stream.finish(GenerationResult("r", "partial", (), "abort", 3, 0, 1))
    assert asyncio.run(stream.result()).text == "partial"


def test_a_crashed_simulator_fails_every_open_request_and_later_ones(monkeypatch, caplog):
    def crash(self, start):  # noqa: ANN001
        raise ZeroDivisionError("step planning bug")

    async def go():
        async with SimEngine(SimConfig(context_length=512)) as engine:
            monkeypatch.setattr(SimEngine, "_plan", crash)
            first = await asyncio.gather(outcome(engine, req("a")), outcome(engine, req("b")))
            return first, await outcome(engine, req("c"))

    with caplog.at_level(logging.ERROR):
        (a, b), later = asyncio.run(go())
    assert isinstance(a, EngineBug) and "step planning bug" in str(a)
    assert isinstance(b, EngineBug)
    assert isinstance(later, EngineError) and "simulator stopped" in str(later)
    assert len([r for r in caplog.records if r.exc_info]) == 1


def test_text_no_engine_can_encode_is_the_requests_mistake():
    with pytest.raises(ValueError, match="prompt: is not valid text"):
        GenerationRequest("r", prompt="a lone \ud800 surrogate")


def test_a_failed_result_raises_whose_fault_it_is():
    # generated_text raised a plain EngineError for every failure: a prompt over the context
    # read as the engine's fault wherever a path reached it before the typed check.
    from ragraph.runtime.generate import generated_text
    from ragraph.runtime.llm.failure import EngineBug
    from ragraph.runtime.llm.protocol import GenerationResult

    def failed(kind):  # noqa: ANN001
        return GenerationResult(rid="r/a/0", text="", token_ids=(), finish_reason="error",
                                prompt_tokens=0, cached_tokens=0, completion_tokens=0,
                                error="why", error_kind=kind)

    with pytest.raises(PromptTooLong, match="generation 'r/a/0': why"):
        generated_text(failed("input"))
    with pytest.raises(EngineBug):
        generated_text(failed("internal"))
