"""The bench on a server (`--engine openai --url`): what it reads from a llama-server, how it
empties it between runs and refuses one it cannot, the server-alone replay, and the targets.
A fake server on loopback stands in for llama-server (the real one: tests/llm)."""

from __future__ import annotations

import asyncio
import json

import pytest

from ragraph.bench.measure.llm_work import LlmWork
from ragraph.bench.output.reasons import why_server_bound
from ragraph.bench.output.results import server_targets
from ragraph.bench.run.cells import Cell, CellResult
from ragraph.bench.run.config import BenchConfig
from ragraph.bench.server import stats as S
from ragraph.bench.server.alone import LABEL, completion_body, replay
from ragraph.errors import ConfigError
from ragraph.ir import Sampling
from ragraph.runtime.executors.app_clients import SentCall
from ragraph.runtime.llm.chat import chat_turn
from tests.llm.fakeserver import FakeServer

from .helpers import summary

# A llama-server /metrics page (build b1-0c1e570), trimmed.
METRICS = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 521
llamacpp:prompt_tokens_cached_total 177
llamacpp:prompt_seconds_total 21.9
llamacpp:tokens_predicted_total 40
llamacpp:tokens_predicted_seconds_total 1.5
llamacpp:n_decode_total 48
llamacpp:n_tokens_max 183
llamacpp:requests_processing 0
llamacpp:n_busy_slots_per_decode 2.5
"""


def test_metrics_are_read_as_counters_and_differences() -> None:
    now = S.parse_metrics(METRICS)
    assert now == S.ServerCounters(521, 177, 40, 48, 120.0)
    run = now.minus(S.ServerCounters(21, 77, 10, 8, 20.0))
    assert (run.prompt_tokens, run.cached_tokens, run.predicted_tokens, run.decodes) == (
        500, 100, 30, 40)
    assert run.batch == pytest.approx(2.5)
    assert S.parse_metrics("vllm:num_requests_running 3\n") is None


class Llama:
    """Just enough of llama-server: /props, /metrics, slot erase (refused without
    --slot-save-path) and a slot cache that `ram_cache` keeps across an erase."""

    def __init__(self, slots: int = 2, save_path: bool = True, ram_cache: bool = False) -> None:
        self.slots, self.save_path, self.ram_cache = slots, save_path, ram_cache
        self.seen: set[str] = set()
        self.erased = 0

    def gets(self) -> dict[str, object]:
        return {"/props": {"total_slots": self.slots, "build_info": "b1-test",
                           "model_path": "/m/gemma.gguf",
                           "default_generation_settings": {"n_ctx": 2048}}}

    def answer(self, body: dict) -> tuple[int, bytes]:
        if not body:  # POST /slots/N?action=erase carries no body
            if not self.save_path:
                return 501, b'{"error": {"message": "start it with --slot-save-path"}}'
            self.erased += 1
            if not self.ram_cache:
                self.seen.clear()
            return 200, b'{"n_erased": 3}'
        prompt = body["prompt"]
        cached = 5 if prompt in self.seen else 0
        self.seen.add(prompt)
        return 200, json.dumps({"choices": [{"text": " x", "finish_reason": "length"}],
                                "usage": {"prompt_tokens": 9, "completion_tokens": 1,
                                          "prompt_tokens_details": {"cached_tokens": cached}}
                                }).encode()


def with_server(fake: Llama, check) -> object:  # noqa: ANN001
    async def main() -> object:
        async with FakeServer(fake.answer, gets=fake.gets()) as srv:
            return await asyncio.to_thread(check, srv.url)

    return asyncio.run(main())


def test_a_server_that_forgets_on_erase_passes_the_prompt_cache_check() -> None:
    fake = Llama(slots=3)
    assert with_server(fake, lambda url: S.slot_count(url)) == 3
    with_server(fake, lambda url: S.check_no_prompt_cache(url, 3))
    assert fake.erased == 6  # every slot, before the probe's second send and after it


def test_a_ram_prompt_cache_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="--cache-ram 0"):
        with_server(Llama(ram_cache=True), lambda url: S.check_no_prompt_cache(url, 2))


def test_slots_that_cannot_be_erased_are_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="--slot-save-path"):
        with_server(Llama(save_path=False), lambda url: S.erase_slots(url, 2))


def test_the_caption_names_the_server() -> None:
    text = with_server(Llama(slots=16), S.describe)
    assert "llama-server b1-test" in text and "16 slots of 2048 tokens" in text
    assert "gemma.gguf" in text


def test_the_replay_sends_each_threads_calls_in_order_as_the_apps_openai_client_does() -> None:
    from ragraph.runtime.executors.app_clients import OpenAIApp, SentCall

    calls = [(f"prompt {i}", Sampling(max_tokens=4 + i, stop=("\n",)))
             for i in range(4)]
    calls.append((chat_turn("a chat turn", system="be brief"), Sampling(max_tokens=3)))

    def body_for(body: dict) -> tuple[int, bytes]:
        if "messages" in body:
            return 200, json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "x"}}]}).encode()
        return 200, b'{"choices": [{"text": "x", "finish_reason": "stop"}]}'

    async def main():
        async with FakeServer(body_for) as srv:
            app = OpenAIApp(srv.url, "m")
            await asyncio.to_thread(lambda: [app.complete(p, params) for p, params in calls])
            app.close()
            # Two app threads: calls 0, 2, 4 on one and 1, 3 on the other.
            lanes = [SentCall(7 + i % 2, c.prompt, c.params) for i, c in enumerate(app.sent)]
            done = await replay(srv.url, "m", lanes)
            return done, srv.requests, srv.paths, app.sent

    done, received, paths, sent = asyncio.run(main())
    assert [(c.prompt, c.params) for c in sent] == calls  # what the app recorded
    assert len({c.worker for c in sent}) == 1  # it called from one thread
    assert received[:5] == [completion_body(p, params, "m") for p, params in calls]
    assert paths[4] == "/v1/chat/completions" and paths[0] == "/v1/completions"
    assert done.failed == 0 and done.workers == 2 and len(done.latencies) == 5
    replayed = received[5:]  # dicts compare by content, whatever order their keys were sent in
    order = [received[:5].index(b) for b in replayed]
    assert sorted(order) == [0, 1, 2, 3, 4]
    # Each lane in its order: call 2 after call 0, call 4 after call 2, call 3 after call 1.
    assert [i for i in order if i % 2 == 0] == [0, 2, 4] and [i for i in order if i % 2] == [1, 3]


def test_on_a_server_the_bench_needs_a_url_and_adds_the_server_alone() -> None:
    with pytest.raises(ConfigError, match="--url"):
        BenchConfig.of(engine="openai")
    with pytest.raises(ConfigError, match="--url"):
        BenchConfig.of(engine="sim", url="http://127.0.0.1:8080")
    config = BenchConfig.of(engine="openai", url="http://127.0.0.1:8080",
                         executors=("ragraph", "langgraph"))
    assert [v.label for v in config.variants()] == ["ragraph", "langgraph", LABEL]
    assert config.runtime().llm.url == "http://127.0.0.1:8080"


def row(executor: str, rps: float, p95: float, conc: int = 16, **kw: object) -> CellResult:
    return CellResult(cell=Cell("irg", 32, None, conc), executor=executor, engine="openai-http",
                      simulated=False, summary=summary(32, 0, 32 / rps, rps, p95 / 2, p95, p95 / 2),
                      retrieval_share=None, speculations=0, speculation_hit_rate=None,
                      synthetic_share=0.0, **kw)


def test_server_targets_at_16_in_flight_with_the_server_alone_as_ceiling() -> None:
    rows = [row("ragraph", 1.2, 10.0, 8), row("langgraph", 1.0, 11.0, 8),
            row("ragraph", 1.3, 12.0, server_batch=6.0,
                llm=LlmWork(llm_tokens=9000, completion_tokens=1000, cached_tokens=4000)),
            row("langgraph", 1.0, 13.0, server_batch=5.5,
                llm=LlmWork(llm_tokens=10000, completion_tokens=1000, cached_tokens=2000)),
            row(LABEL, 1.4, 2.0)]
    thr, p95 = server_targets(rows)
    assert (thr.concurrency, thr.want, thr.got, thr.ceiling) == (16, 1.5, pytest.approx(1.3),
                                                                 pytest.approx(1.4))
    assert not thr.met and not thr.reachable
    assert "out of reach" in thr.verdict()
    assert p95.metric == "p95" and p95.met
    cell = [r for r in rows if r.cell.concurrency == 16]
    why = why_server_bound(thr, cell)
    assert "1.40 req/s" in why and "gains at most 1.40x" in why
    assert "8,000 prompt tokens for ragraph" in why and "9,000 for the app" in why


def test_a_keyed_server_gets_the_key_on_every_call_of_the_bench() -> None:
    """llama-server --api-key guards /slots and /metrics as well as the completions."""
    fake = Llama(slots=2)

    async def main() -> list[dict[str, str]]:
        async with FakeServer(fake.answer, gets=fake.gets()) as srv:
            await asyncio.to_thread(S.check_no_prompt_cache, srv.url, 2, 30.0, "sekrit")
            await replay(srv.url, "m", [SentCall(1, "a prompt", Sampling(max_tokens=1))],
                         api_key="sekrit")
            return srv.headers

    headers = asyncio.run(main())
    assert len(headers) == 1 + 2 + 2 + 1 + 2 + 1  # probe, 2 others, erase, probe, erase, replay
    assert all(h.get("authorization") == "Bearer sekrit" for h in headers)


def test_the_bench_passes_the_model_and_server_options_to_both_clients() -> None:
    config = BenchConfig.of(engine="openai", url="http://127.0.0.1:1", openai_endpoint="chat",
                         api_key_env="RAGRAPH_TEST_KEY", ctx=4096)
    runtime = config.runtime()
    llm = runtime.llm
    assert (llm.openai_endpoint, llm.api_key_env, llm.ctx) == ("chat", "RAGRAPH_TEST_KEY", 4096)
    with pytest.raises(ConfigError, match="RAGRAPH_TEST_KEY"):
        _ = config.api_key  # unset: the variable is named, the key never is
