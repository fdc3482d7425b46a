"""Chaos: `ragraph serve` over an OpenAI-compatible upstream that fails, sends garbage, hangs, goes
down and comes back, under mixed traffic on every workflow and endpoint at 64 in flight, with a
fifth of the clients leaving mid-stream, malformed bodies, and slow clients that never finish
their headers.

What must hold: every well-formed request gets exactly one answer; an answer is the one
`ragraph run` gives on the simulated engine (the upstream streams that engine's text); a request
fails only if it was in flight while the upstream was faulty, and then with 502 or 504 (or an
`error` event on a stream), never with a 500 or an empty answer; every stream ends with its last
event; every malformed body gets its 4xx; the server answers again once the upstream is back;
memory and file descriptors stay flat."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from ragraph.runtime.config import RuntimeConfig
from ragraph.serve import ServeSettings
from tests.chaos.clients import MAX_BODY, Result, Shot, fire, plan
from tests.chaos.fds import fds
from tests.chaos.upstream import SimUpstream
from tests.serve.conftest import graphs, question, reference
from tests.serve.servers import serving, until

# Every shipped workflow: one added to workflows/ is in the chaos at once.
WORKFLOWS = tuple(sorted(p.stem for p in (Path(__file__).parents[2] / "workflows").glob("*.rag")))
CLIENTS = 64
KEEPALIVE = 32  # the HTTP engine's idle connections (llm/httpbase.py)
REQUEST_TIMEOUT_S = 20.0
FAULT_S = 1.5  # how long each fault lasts
# (share of requests answered when it starts, fault)
SCHEDULE = ((0.25, "error"), (0.4, "garbage"), (0.55, "hang"), (0.7, "down"))


@dataclass
class Chaos:
    """When each fault was on: a request may fail only if it overlapped one."""

    windows: list[tuple[str, float, float]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def overlaps(self, r: Result) -> bool:
        # A hung request fails when its timeout passes, after the window closed.
        return any(r.sent <= end and r.done >= start for _, start, end in self.windows)


async def drive(url: str, shots: list[Shot], upstream: SimUpstream, chaos: Chaos,
                schedule: tuple[tuple[float, str], ...] = SCHEDULE) -> list[Result]:
    queue: asyncio.Queue[Shot] = asyncio.Queue()
    for shot in shots:
        queue.put_nowait(shot)
    results: list[Result] = []
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S * 3,
                                 limits=limits) as client:

        async def worker() -> None:
            while not queue.empty():
                shot, sent = queue.get_nowait(), time.monotonic()
                result = await fire(client, shot)
                results.append(Result(**{**result.__dict__, "sent": sent,
                                         "done": time.monotonic()}))

        await asyncio.gather(*(worker() for _ in range(CLIENTS)),
                             _faults(url, upstream, chaos, results, len(shots), schedule))
    return results


async def _faults(url: str, upstream: SimUpstream, chaos: Chaos, results: list[Result],
                  total: int, schedule: tuple[tuple[float, str], ...]) -> None:
    loop = asyncio.get_running_loop()
    for share, fault in schedule:
        while len(results) < share * total:
            await asyncio.sleep(0.05)
        start = time.monotonic()
        if fault == "down":
            await loop.run_in_executor(None, upstream.down)
            # /readiness tells a balancer the truth both ways.
            await _readiness(url, 503, chaos)
            await loop.run_in_executor(None, upstream.up)
            await _readiness(url, 200, chaos)
        else:
            upstream.fault = fault  # type: ignore[assignment]
            await asyncio.sleep(FAULT_S)
            upstream.fault = "none"
        chaos.windows.append((fault, start, time.monotonic()))


async def _readiness(url: str, status: int, chaos: Chaos, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=url) as client:
        while (await client.get("/readiness")).status_code != status:
            if time.monotonic() > deadline:
                chaos.problems.append(f"/readiness never answered {status} in {timeout_s:g} s")
                return
            await asyncio.sleep(0.1)


def slow_clients(url: str, count: int) -> list[socket.socket]:
    """Connections that send half a request's headers and then nothing (slowloris)."""
    host, port = url.removeprefix("http://").split(":")
    socks = []
    for _ in range(count):
        s = socket.create_connection((host, int(port)))
        s.sendall(b"POST /runs/wait HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: applic")
        socks.append(s)
    return socks


def closed_by_server(s: socket.socket, timeout_s: float) -> bool:
    s.settimeout(timeout_s)
    try:
        while s.recv(4096):
            pass  # a 408 first is fine; then the close
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    finally:
        s.close()


def rss_mb() -> float:
    for line in open("/proc/self/status", encoding="ascii"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_chaos(count: int) -> None:
    questions = [question(i) for i in range(24)]
    shots = plan(count, WORKFLOWS, questions)
    sim = RuntimeConfig.of(engine="sim", concurrency=CLIENTS, search_threads=1, nprobe=16)
    want = reference([(s.workflow, s.question) for s in shots if s.kind != "bad"], sim)
    settings = ServeSettings(port=0, max_body_bytes=MAX_BODY, request_timeout_s=REQUEST_TIMEOUT_S,
                             header_timeout_s=2.0)
    with SimUpstream() as upstream:
        config = RuntimeConfig.of(engine="openai", url=upstream.url, concurrency=CLIENTS,
                                  search_threads=1, nprobe=16)
        with serving(graphs(WORKFLOWS), config, settings) as served:
            warm = asyncio.run(drive(served.url, shots[:CLIENTS], upstream, Chaos(), ()))
            until(served.idle, what="idle after the warm-up")
            before = (rss_mb(), *fds(upstream.port))
            slow = slow_clients(served.url, 16)
            chaos = Chaos()
            results = asyncio.run(drive(served.url, shots[CLIENTS:-CLIENTS], upstream, chaos))
            until(served.idle, timeout_s=REQUEST_TIMEOUT_S * 2, what="no request left")
            # After the faults: every request answered again (and the engine's idle
            # connections to the upstream that died are replaced, not kept).
            after_faults = asyncio.run(drive(served.url, shots[-CLIENTS:], upstream, Chaos(),
                                             ()))
            until(served.idle, what="idle after the faults")
            open_slow = sum(not closed_by_server(s, timeout_s=10) for s in slow)
            hanging = upstream.hanging
            after = (rss_mb(), *fds(upstream.port))
    problems = chaos.problems + check(warm + results + after_faults, want, chaos)
    if hanging:
        problems.append(f"{hanging} upstream requests still open after their clients left")
    if open_slow:
        problems.append(f"{open_slow} of {len(slow)} slow clients kept open")
    if after[0] - before[0] >= 96:
        problems.append(f"RSS grew {before[0]:.0f} -> {after[0]:.0f} MB")
    if after[1] - before[1] >= 8:
        problems.append(f"fds grew {before[1]} -> {after[1]}")
    if after[2] > 2 * KEEPALIVE + 8:
        problems.append(f"{after[2]} sockets to the upstream, past the engine's pool")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])


def check(results: list[Result], want: dict, chaos: Chaos) -> list[str]:
    """What went wrong, one line each (empty: everything held)."""
    problems = [] if len(results) == len({r.shot.n for r in results}) else ["a shot twice"]
    failed = 0
    for r in results:
        if r.shot.kind == "bad":
            if r.status != r.shot.bad[2]:
                problems.append(f"bad body {r.shot.n % 10}: {r.status}, want {r.shot.bad[2]}")
        elif not r.ended:
            problems.append(f"stream cut without an end or error event: {r}")
        elif r.status == 200 and r.error is None:
            if r.shot.kind != "drop" and r.answer != want[(r.shot.workflow,
                                                           r.shot.question)].answer:
                problems.append(f"wrong answer: {r}")
        elif r.status not in (200, 502, 504):
            problems.append(f"{r.status} for a well-formed request: {r}")
        elif not chaos.overlaps(r):
            problems.append(f"failed outside every fault window: {r}")
        else:
            failed += 1
    print(f"\nchaos: {len(results)} requests, {failed} failed during faults "
          f"{[(f, round(e - s, 1)) for f, s, e in chaos.windows]}")
    return problems


@pytest.mark.timeout(600)
def test_chaos_thousand_requests():
    run_chaos(1000)


@pytest.mark.soak  # `make soak`: CI runs the thousand above
@pytest.mark.timeout(1800)
def test_chaos_long():
    run_chaos(4000)
