"""`ragraph bench --target URL`: drive a running `ragraph serve` (or any OpenAI-compatible server
whose models are workflows) over HTTP and report what its clients saw.

Open loop: Poisson arrivals at a rate (the same seeded schedule as the in-process bench), each
request sent when it arrives whatever is still in flight. Closed loop: `clients` clients, each
sending its next request when its last one was answered (what `ragraph run --input` does with
`--concurrency`). A share of the requests stream (`stream: true`), which also gives the time to
the first token."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import httpx
import numpy as np

from ragraph.bench.run.arrivals import arrive, poisson_offsets
from ragraph.errors import ConfigError
from ragraph.runtime.outcome import percentile
from ragraph.runtime.request import Request


@dataclass(frozen=True)
class LoadSpec:
    target: str
    requests: int
    rate: float | None  # Poisson arrivals per second; None: a closed loop of `clients`
    clients: int = 8
    stream_share: float = 0.0
    api_key: str | None = None
    seed: int = 0
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.requests < 1 or self.clients < 1:
            raise ConfigError("--requests/--concurrency", "must be positive")
        if not 0 <= self.stream_share <= 1:
            raise ConfigError("--stream", f"must be in [0, 1], got {self.stream_share}")


@dataclass(frozen=True)
class Shot:
    workflow: str
    status: int  # 0: no HTTP answer (the connection failed)
    latency_s: float
    first_token_s: float | None = None
    error: str | None = None
    answer: str | None = None


@dataclass(frozen=True)
class LoadReport:
    spec: LoadSpec
    shots: tuple[Shot, ...]
    wall_s: float

    @property
    def ok(self) -> tuple[Shot, ...]:
        return tuple(s for s in self.shots if s.status == 200 and s.error is None)

    @property
    def throughput_rps(self) -> float:
        return len(self.ok) / self.wall_s if self.wall_s > 0 else 0.0

    def latency(self, q: float) -> float | None:
        return percentile([s.latency_s for s in self.ok], q)

    def first_token(self, q: float) -> float | None:
        return percentile([s.first_token_s for s in self.ok if s.first_token_s is not None], q)

    def errors(self) -> Counter[str]:
        return Counter(str(s.status) if s.status else "connection" for s in self.shots
                       if s.status != 200 or s.error is not None)


async def drive(spec: LoadSpec, requests: Sequence[Request]) -> LoadReport:
    """Send `requests` (each names its workflow) as `spec` says; every request is reported."""
    headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}
    limits = httpx.Limits(max_connections=spec.clients if spec.rate is None else None)
    streams = _stream_choices(len(requests), spec.stream_share, spec.seed)
    async with httpx.AsyncClient(base_url=spec.target, headers=headers, limits=limits,
                                 timeout=spec.timeout_s) as client:
        start = time.perf_counter()
        if spec.rate is None:
            shots = await _closed_loop(client, requests, streams, spec.clients)
        else:
            offsets = poisson_offsets(spec.rate, len(requests), spec.seed)
            tasks = []
            async for request in arrive(requests, offsets):
                i = len(tasks)
                tasks.append(asyncio.create_task(_one(client, request, streams[i])))
            shots = list(await asyncio.gather(*tasks))
        wall = time.perf_counter() - start
    return LoadReport(spec, tuple(shots), wall)


async def workflows_of(spec: LoadSpec) -> tuple[str, ...]:
    """The server's workflows (its OpenAI models)."""
    headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}
    async with httpx.AsyncClient(base_url=spec.target, headers=headers, timeout=30) as client:
        try:
            response = await client.get("/v1/models")
        except httpx.HTTPError as err:
            raise ConfigError("--target", f"cannot reach {spec.target}: {err}") from err
        if response.status_code != 200:
            raise ConfigError("--target", f"{spec.target}/v1/models answered "
                              f"{response.status_code}: {response.text[:200]}")
        return tuple(m["id"] for m in response.json()["data"])


def _stream_choices(n: int, share: float, seed: int) -> list[bool]:
    return [bool(x) for x in np.random.default_rng(seed + 1).random(n) < share]


async def _closed_loop(client: httpx.AsyncClient, requests: Sequence[Request],
                       streams: list[bool], clients: int) -> list[Shot]:
    shots: list[Shot | None] = [None] * len(requests)
    next_index = iter(range(len(requests)))

    async def one_client() -> None:
        for i in next_index:  # shared: each index is taken by one client
            shots[i] = await _one(client, requests[i], streams[i])

    await asyncio.gather(*(one_client() for _ in range(clients)))
    return [s for s in shots if s is not None]


async def _one(client: httpx.AsyncClient, request: Request, stream: bool) -> Shot:
    workflow = request.workflow or ""
    body = {"model": workflow, "messages": [{"role": "user", "content": request.question}],
            "stream": stream}
    start = time.perf_counter()
    try:
        if not stream:
            response = await client.post("/v1/chat/completions", json=body)
            latency = time.perf_counter() - start
            if response.status_code != 200:
                return Shot(workflow, response.status_code, latency, error=response.text[:200])
            answer = response.json()["choices"][0]["message"]["content"]
            return Shot(workflow, 200, latency, answer=answer)
        return await _streamed(client, body, workflow, start)
    except httpx.HTTPError as err:
        return Shot(workflow, 0, time.perf_counter() - start, None, f"{type(err).__name__}: {err}")


async def _streamed(client: httpx.AsyncClient, body: dict, workflow: str, start: float) -> Shot:
    first, error, text = None, None, []
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                error = chunk["error"].get("message", "error")
            deltas = [c["delta"]["content"] for c in chunk.get("choices", ())
                      if c.get("delta", {}).get("content")]
            if deltas and first is None:
                first = time.perf_counter() - start
            text += deltas
        status = response.status_code
    return Shot(workflow, status, time.perf_counter() - start, first, error,
                "".join(text) if status == 200 else None)
