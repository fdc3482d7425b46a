"""A bounded load test: 1,000 requests from 64 concurrent clients, some streaming, some going away
mid-stream, some malformed, through a real server on the simulated engine over real faiss.

Every well-formed request is answered exactly once and as `ragraph run` answers it; every
malformed one gets its status; no request or generation is left running at the end; nothing a
request held stays in memory."""

from __future__ import annotations

import asyncio
import gc
import json
import random
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ragraph.runtime.hub import Ticket
from ragraph.runtime.request import RequestState
from ragraph.runtime.scheduler.jobs import GenJob, RetJob
from ragraph.runtime.scheduler.live import LiveRequest
from ragraph.serve import ServeSettings
from tests.serve.conftest import NAMES, SIM, graphs, question, reference
from tests.serve.servers import serving, until

REQUESTS, CLIENTS, QUESTIONS = 1000, 64, 30
KINDS = ("wait", "chat", "stream", "drop", "bad")
WEIGHTS = (35, 25, 20, 10, 10)
MAX_BODY = 64 * 1024
# (body, status): bad JSON, unknown workflow, no question, too large.
BAD = ((b'{"model": "hyde", ', 400), (json.dumps({"model": "gpt-9", "messages": [
    {"role": "user", "content": "x"}]}).encode(), 404),
    (json.dumps({"model": "hyde", "messages": [{"role": "assistant", "content": "x"}]}).encode(),
     400), (json.dumps({"model": "hyde", "prompt": "x" * MAX_BODY}).encode(), 413))


@dataclass(frozen=True)
class Shot:
    kind: str
    workflow: str
    question: str
    bad: int = 0  # which BAD body


@dataclass(frozen=True)
class Result:
    shot: Shot
    status: int
    answer: str | None = None


def plan(seed: int = 7) -> list[Shot]:
    rng = random.Random(seed)
    shots = []
    for i in range(REQUESTS):
        kind = rng.choices(KINDS, WEIGHTS)[0]
        shots.append(Shot(kind, NAMES[i % len(NAMES)], question(rng.randrange(QUESTIONS)),
                          bad=i % len(BAD)))
    return shots


async def fire(client: httpx.AsyncClient, shot: Shot) -> Result:
    chat = {"model": shot.workflow, "messages": [{"role": "user", "content": shot.question}]}
    if shot.kind == "bad":
        response = await client.post("/v1/chat/completions", content=BAD[shot.bad][0],
                                     headers={"Content-Type": "application/json"})
        return Result(shot, response.status_code)
    if shot.kind == "wait":
        response = await client.post("/runs/wait", json={
            "workflow": shot.workflow, "input": {"question": shot.question}})
        return Result(shot, response.status_code, response.json().get("answer"))
    if shot.kind == "chat":
        response = await client.post("/v1/chat/completions", json=chat)
        return Result(shot, response.status_code,
                      response.json()["choices"][0]["message"]["content"])
    return await _stream(client, shot, {**chat, "stream": True})


async def _stream(client: httpx.AsyncClient, shot: Shot, body: dict) -> Result:
    text = []
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"]
            if delta and delta[0]["delta"].get("content"):
                text.append(delta[0]["delta"]["content"])
                if shot.kind == "drop":
                    return Result(shot, response.status_code)  # leaves mid-stream
    return Result(shot, response.status_code, "".join(text))


async def drive(url: str, shots: list[Shot]) -> list[Result]:
    queue: asyncio.Queue[Shot] = asyncio.Queue()
    for shot in shots:
        queue.put_nowait(shot)
    results: list[Result] = []
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:

        async def worker() -> None:
            while not queue.empty():
                results.append(await fire(client, queue.get_nowait()))

        await asyncio.gather(*(worker() for _ in range(CLIENTS)))
    return results


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def held() -> int:
    """Objects a request holds while it runs, still alive."""
    gc.collect()
    live = Ticket | RequestState | LiveRequest | GenJob | RetJob
    return sum(isinstance(o, live) for o in gc.get_objects())


@pytest.mark.timeout(900)
def test_thousand_requests_from_64_clients():
    shots = plan()
    want = reference([(s.workflow, s.question) for s in shots if s.kind != "bad"])
    config = SIM.with_knobs(concurrency=CLIENTS)
    settings = ServeSettings(port=0, max_body_bytes=MAX_BODY)
    with serving(graphs(), config, settings) as served:
        half = len(shots) // 2
        first = asyncio.run(drive(served.url, shots[:half]))
        until(served.idle, what="idle after the first half")
        before = (rss_mb(), held())
        second = asyncio.run(drive(served.url, shots[half:]))
        until(served.idle, what="no request or generation left")
        after = (rss_mb(), held())
        metrics = httpx.get(served.url + "/metrics").text
    results = first + second
    assert len(results) == len(shots)
    for r in results:
        if r.shot.kind == "bad":
            assert r.status == BAD[r.shot.bad][1], r
        else:
            assert r.status == 200, r
        if r.shot.kind in ("wait", "chat", "stream"):
            assert r.answer == want[(r.shot.workflow, r.shot.question)].answer, r
    failures = ("client_error", "upstream_error", "internal_error", "timeout", "shutdown")
    finished = {status: _total(metrics, status) for status in ("ok", "client_gone", *failures)}
    well_formed = sum(s.kind != "bad" for s in shots)
    dropped = sum(s.kind == "drop" for s in shots)
    assert all(finished[status] == 0 for status in failures), finished
    assert finished["ok"] + finished["client_gone"] == well_formed  # each answered exactly once
    assert finished["client_gone"] <= dropped
    print(f"\nload: {len(shots)} requests, {finished}, RSS {before[0]:.0f} -> {after[0]:.0f} MB, "
          f"request objects alive {before[1]} -> {after[1]}")
    assert after[1] == 0 and before[1] == 0
    assert after[0] - before[0] < 64  # MB: flat, beside allocator noise


def _total(metrics: str, status: str) -> int:
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                   if line.startswith("ragraph_requests_total{") and f'status="{status}"' in line))
