"""The LangGraph app's server work with everything else taken out: the generation calls the app
made in a cell, sent straight to the server by as many workers as the app had threads, each
worker replaying one thread's calls in the order that thread made them, with no retrieval,
embedding or framework between them.

A LangGraph worker thread runs one request at a time, every node of it (a step with a single
task runs inline), so a thread's calls keep each request's order and its later prompts still
find their prefix in the slot that served the earlier ones. The replay's requests a second
over the app's say how much of the app's time was the server's own work: near 1, the app
already keeps the server busy, and no client of it does much better without giving the server
less to compute (fewer prompt tokens, larger decode batches), which its counters show.
Each call goes as the app's `openai` client sends it: one non-streamed `/v1/completions`
request, or `/v1/chat/completions` for a chat turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ragraph.bench.server.stats import auth
from ragraph.ir import Sampling
from ragraph.runtime.executors.app_clients import SentCall
from ragraph.runtime.llm.chat import Prompt, as_dicts
from ragraph.runtime.outcome import Summary, percentile

LABEL = "server alone"


def completion_body(prompt: Prompt, params: Sampling, model: str) -> dict[str, Any]:
    """The JSON the `openai` client sends for the app's call (`OpenAIApp.complete`), its
    explicit nulls included: a completion, or a chat turn's messages."""
    body: dict[str, Any] = {"model": model, "max_tokens": params.max_tokens,
                            "temperature": params.temperature, "top_p": params.top_p,
                            "stop": list(params.stop) or None, "seed": params.seed}
    if isinstance(prompt, str):
        return {**body, "prompt": prompt, "logprobs": 1 if params.logprobs else None}
    return {**body, "messages": as_dicts(prompt), "logprobs": params.logprobs or None}


def path_for(prompt: Prompt) -> str:
    return "/v1/completions" if isinstance(prompt, str) else "/v1/chat/completions"


@dataclass(frozen=True)
class Replay:
    wall_s: float
    latencies: tuple[float, ...]  # of each call that succeeded
    failed: int
    workers: int

    def latency(self, q: float) -> float:
        return percentile(self.latencies, q, 0.0)

    def summary(self, requests: int) -> Summary:
        """The replay as a run's summary: the cell's `requests` over the replay's wall time,
        the latencies of its calls (a call has no first token apart from its answer)."""
        wall, latencies = self.wall_s, self.latencies
        return Summary(requests=requests, errors=self.failed, wall_s=wall,
                       throughput_rps=requests / wall if wall > 0 else 0.0,
                       p50_s=self.latency(50), p95_s=self.latency(95), p99_s=self.latency(99),
                       mean_s=sum(latencies) / len(latencies) if latencies else 0.0,
                       ttft_p50_s=None)


def lanes(calls: Sequence[SentCall]) -> list[list[SentCall]]:
    """The calls of each of the app's threads, in the order that thread made them."""
    by_worker: dict[int, list[SentCall]] = {}
    for call in calls:
        by_worker.setdefault(call.worker, []).append(call)
    return list(by_worker.values())


async def replay(url: str, model: str, calls: Sequence[SentCall], timeout_s: float = 600.0,
                 api_key: str | None = None) -> Replay:
    """Every lane at once, each lane's calls one after another."""
    work = lanes(calls)
    latencies: list[float] = []
    failed = 0
    width = max(len(work), 1)
    limits = httpx.Limits(max_connections=width, max_keepalive_connections=width)
    async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout_s, limits=limits,
                                 headers=auth(api_key)) as client:

        async def worker(lane: list[SentCall]) -> None:
            nonlocal failed
            for call in lane:
                start = time.perf_counter()
                resp = await client.post(path_for(call.prompt),
                                         json=completion_body(call.prompt, call.params, model))
                if resp.status_code == 200:
                    latencies.append(time.perf_counter() - start)
                else:
                    failed += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker(lane) for lane in work))
        wall = time.perf_counter() - start
    return Replay(wall, tuple(latencies), failed, len(work))
