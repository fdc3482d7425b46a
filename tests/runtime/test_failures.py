"""Failures reach the request with whose fault they are, under every executor: a question too
long for the model's context is the client's ("input"), an upstream server's error or garbage is
the engine's ("engine"), and an engine that stops a generation nobody aborted never makes an
empty answer. On the simulated engine and on an OpenAI-compatible fake server on loopback."""

from __future__ import annotations

import asyncio

import pytest

from ragraph.api.load import compile_catalog
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.http.openai import OpenAIHttpConfig, OpenAIHttpEngine
from ragraph.runtime.llm.sim.engine import SimEngine
from ragraph.runtime.request import Request
from tests.llm.fakeserver import FakeServer, sse
from tests.runtime import fakes, workflows
from tests.runtime.stops_on_its_own import StopsOnItsOwn
from tests.runtime.test_semantics import FAST

# About 200 KB: some 34,000 words, over the simulated engine's 32,768-token context.
HUGE = "lorem " * 34_000
NORMAL = [f"What is notable about topic {i}?" for i in range(4)]
EXECUTORS = [("sequential", "-O0"), ("stage-batched", "-O0"), ("ragraph", "-O0"),
             ("ragraph", "-O2")]


@pytest.fixture(scope="module")
def search():
    return fakes.random_search()


def requests(huge: str | None = HUGE) -> list[Request]:
    asked = [Request(id=f"q{i}", question=q) for i, q in enumerate(NORMAL)]
    return asked + ([Request(id="huge", question=huge)] if huge is not None else [])


def run(engine, search, executor: str = "ragraph", passes: str = "-O2", asked=None) -> dict:  # noqa: ANN001
    """Outcomes by request id."""
    async def go():
        config = RuntimeConfig.of(engine="sim", executor=executor, passes=passes, concurrency=4,
                                  budget_ms=0.05, tau=1.0)
        async with engine:
            services = Services(llm=engine, search=search)
            return await asyncio.wait_for(
                execute(compile_catalog(workflows.hyde(), config.scheduler.passes),
                        asked or requests(), config, services), 120)

    return {o.rid: o for o in asyncio.run(go()).outcomes}


@pytest.mark.parametrize("executor, passes", EXECUTORS)
def test_a_question_too_long_for_the_context_is_the_clients_mistake(search, executor, passes):
    got = run(SimEngine(FAST), search, executor, passes)
    huge = got["huge"]
    assert huge.error_kind == "input" and huge.answer is None
    assert "node 'hypo'" in huge.error and "32768" in huge.error
    assert "prompt has 340" in huge.error  # its token count (34,000 words and the template)
    assert all(got[f"q{i}"].error is None and got[f"q{i}"].answer for i in range(4))


def openai_server(status_for_huge: int, body_for_huge: bytes):  # noqa: ANN201
    """A fake OpenAI-compatible server: the huge prompt gets the given answer, others text."""
    good = sse({"choices": [{"text": " fine", "finish_reason": None}]},
               {"choices": [{"text": "", "finish_reason": "stop"}]})
    return FakeServer(lambda r: (status_for_huge, body_for_huge) if len(r["prompt"]) > 100_000
                      else (200, good))


def on_server(server: FakeServer, search, executor: str, passes: str) -> dict:  # noqa: ANN001
    async def go() -> dict:
        async with server:
            engine = OpenAIHttpEngine(OpenAIHttpConfig(base_url=server.url, name="upstream"))
            return await asyncio.to_thread(run, engine, search, executor, passes)

    return asyncio.run(go())


CASES = {
    "too long": (400, b'{"object": "error", "message": "This model\'s maximum context length is '
                      b'2048 tokens. However, you requested 34072 tokens."}', "input",
                 "maximum context length is 2048"),
    "upstream 500": (500, b"Internal Server Error", "engine", "HTTP 500"),
    "malformed usage": (200, sse({"choices": [{"text": " x", "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": "abc"}}),
                        "engine", "usage.prompt_tokens 'abc'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("executor, passes", [("sequential", "-O0"), ("ragraph", "-O2")])
def test_an_upstream_server_s_failure_says_whose_it_is(search, case, executor, passes):
    status, body, kind, says = CASES[case]
    got = on_server(openai_server(status, body), search, executor, passes)
    huge = got["huge"]
    assert huge.error_kind == kind and huge.answer is None, huge
    assert says in huge.error and "upstream at http://127.0.0.1:" in huge.error
    assert "node 'hypo'" in huge.error
    assert all(got[f"q{i}"].answer == "fine" for i in range(4))


@pytest.mark.parametrize("executor, passes", EXECUTORS)
def test_a_generation_the_engine_stops_on_its_own_fails_its_request(search, executor, passes):
    want = run(SimEngine(FAST), search, executor, passes, requests(huge=None))
    engine = StopsOnItsOwn(SimEngine(FAST), lambda rid: rid.startswith("q1/answer/"))
    got = run(engine, search, executor, passes, requests(huge=None))
    assert engine.stopped, "the engine stopped the answer of q1"
    assert got["q1"].error_kind == "engine" and got["q1"].answer is None
    assert "on its own" in got["q1"].error
    for rid in ("q0", "q2", "q3"):
        assert got[rid].answer == want[rid].answer
