"""`serve --adapt` under an overload phase: p95 with and without adaptation, and what it costs in
answer quality (issue 32).

    python benchmarks/adapt_overload.py --front hyde.tune.jsonl --slo 2 [--overload 1.1]

Runs `ragraph serve WORKFLOW --engine sim` twice, fixed at the front's best-quality point and
with `--adapt FRONT --adapt-slo p95=SLO`, and sends each the same open-loop Poisson arrivals:
the 1x rate (requests/s), then twice that (2x), then 1x again, each for `--phase-s`. The 1x rate
is half `--overload` times the fixed server's capacity, measured first in the same run (closed
loop, twice its concurrency in flight, `--probe-s`), so 2x overloads the best point whatever the
machine's load that day; `--rate` gives it by hand instead. Prints, per run and phase, the
requests answered, their p95 and mean latency, and for the adaptive run the points the requests
went to (from /metrics) and the quality of those points as tune measured them (EM, F1, recall on
its dev questions), weighted by the requests each served. Writes the numbers as JSON (`--out`),
with every request's submission time and latency and, twice a second, the requests in flight
and the adaptive server's point; each server's log, the adaptive one's switches included, goes
to $TMPDIR/adapt-bench-{fixed,adapt}.log. Not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
PHASES = (("1x", 1.0), ("2x", 2.0), ("1x again", 1.0))


def serve(workflow: Path, port: int, extra: list[str], name: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "ragraph.cli.main", "serve", str(workflow), "--engine", "sim",
            "--port", str(port), *extra]
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"adapt-bench-{name}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readiness", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: see {log.name}")
        time.sleep(0.5)
    raise RuntimeError("the server did not start")


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=1000))


async def ask(http: httpx.AsyncClient, url: str, workflow: str, question: str) -> float | None:
    """One request's latency, None when it failed."""
    t0 = time.perf_counter()
    r = await http.post(url + "/runs/wait", json={"workflow": workflow,
                                                  "input": {"question": question}})
    return time.perf_counter() - t0 if r.status_code == 200 else None


async def capacity(url: str, workflow: str, questions: list[str], concurrency: int,
                   seconds: float) -> float:
    """Requests/s the server answers with twice its concurrency always in flight (closed
    loop), counted after the first quarter of `seconds` (the queue filling)."""
    start = time.perf_counter()
    counted_from, end = start + seconds / 4, start + seconds
    done = []

    async def lane(k: int) -> None:
        i = k
        async with client() as http:
            while time.perf_counter() < end:
                if await ask(http, url, workflow, questions[i % len(questions)]) is not None:
                    done.append(time.perf_counter())
                i += 2 * concurrency

    await asyncio.gather(*(lane(k) for k in range(2 * concurrency)))
    counted = [t for t in done if counted_from <= t <= end]
    return len(counted) / (end - counted_from)


async def drive(url: str, workflow: str, questions: list[str], rate: float, phase_s: float,
                seed: int, watch: bool) -> dict:
    """Open-loop arrivals, phase by phase: each phase's latencies of answered requests, every
    request's (phase, submitted at, latency or None) and, `watch`ing, twice a second the
    requests in flight and the adaptive point (seconds from the start)."""
    rng = random.Random(seed)
    latencies: dict[str, list[float]] = {name: [] for name, _ in PHASES}
    requests: list[tuple[str, float, float | None]] = []
    start = time.perf_counter()
    tasks = []
    timeline: list[tuple[float, float, float]] = []
    watcher = asyncio.create_task(sample(url, start, timeline)) if watch else None
    async with client() as http:

        async def one(phase: str, question: str) -> None:
            at = time.perf_counter() - start
            latency = await ask(http, url, workflow, question)
            requests.append((phase, round(at, 3), latency and round(latency, 3)))
            if latency is not None:
                latencies[phase].append(latency)

        i = 0
        for phase, scale in PHASES:
            end = time.perf_counter() + phase_s
            while (now := time.perf_counter()) < end:
                tasks.append(asyncio.create_task(one(phase, questions[i % len(questions)])))
                i += 1
                await asyncio.sleep(min(rng.expovariate(rate * scale), max(end - now, 0)))
        await asyncio.gather(*tasks)
    if watcher is not None:
        watcher.cancel()
    return {"latencies": latencies, "requests": sorted(requests, key=lambda r: r[1]),
            "timeline": timeline}


async def sample(url: str, start: float, timeline: list[tuple[float, float, float]]) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    async with httpx.AsyncClient(timeout=10) as http:
        while True:
            text = (await http.get(url + "/metrics")).text
            values = {s.name: s.value for f in text_string_to_metric_families(text)
                      for s in f.samples if not s.labels}
            timeline.append((round(time.perf_counter() - start, 2),
                             values.get("ragraph_requests_in_flight", -1),
                             values.get("ragraph_adapt_level", -1)))
            await asyncio.sleep(0.5)


def routed(url: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", timeout=10).text
    return {s.labels["point"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "ragraph_adapt_requests_total"}


@contextmanager
def server(args: argparse.Namespace, adapt: bool) -> Iterator[str]:
    """A server fixed at the front's best point, or adapting over the front; its URL."""
    from ragraph.tune.levels import front_levels

    best = front_levels(args.front)[0]
    extra = ["--concurrency", str(args.concurrency), "--nprobe", str(best.nprobe)]
    workflow = args.workflow
    if adapt:
        extra += ["--adapt", str(args.front), "--adapt-slo", f"p95={args.slo}s"]
    else:  # fixed at the best point: its workflow as tune measured it
        from ragraph.dsl import load
        from ragraph.dsl.printer import to_rag
        from ragraph.tune.levels import level_graph

        workflow = Path(os.environ.get("TMPDIR", "/tmp")) / f"{args.workflow.stem}.best.rag"
        workflow.write_text(to_rag(level_graph(load(args.workflow), best)), encoding="utf-8")
    proc = serve(workflow, args.port, extra, "adapt" if adapt else "fixed")
    try:
        yield f"http://127.0.0.1:{args.port}"
    finally:
        proc.terminate()
        proc.wait(timeout=120)


def run(args: argparse.Namespace, url: str, adapt: bool, rate: float,
        questions: list[str], points: list[dict]) -> dict:
    from ragraph.runtime.outcome import percentile

    driven = asyncio.run(drive(url, args.workflow.stem, questions, rate, args.phase_s, 0,
                               watch=adapt))
    lat = driven["latencies"]
    counts = routed(url) if adapt else {"0": float(sum(len(v) for v in lat.values()))}
    return {"adapt": adapt, "phases": {name: {"answered": len(v), "p95_s": percentile(v, 95),
                                              "mean_s": sum(v) / len(v) if v else None}
                                       for name, v in lat.items()},
            "points": counts, "quality": weighted(points, counts),
            "requests": driven["requests"], "timeline": driven["timeline"]}


def probe(args: argparse.Namespace, url: str, questions: list[str]) -> float:
    """The fixed server's capacity, requests/s."""
    rps = asyncio.run(capacity(url, args.workflow.stem, questions, args.concurrency,
                               args.probe_s))
    print(f"capacity of the best point: {rps:.2f} req/s; 1x {args.overload * rps / 2:.2f} "
          f"req/s, 2x {args.overload * rps:.2f}", flush=True)
    return rps


def weighted(points: list[dict], counts: dict[str, float]) -> dict[str, float]:
    total = sum(counts.values()) or 1.0
    return {k: sum(points[int(level)][k] * n for level, n in counts.items()) / total
            for k in ("em", "f1", "recall")}


def level_quality(front: Path) -> list[dict]:
    """Each level's measured quality (the front's first point of each quality setting)."""
    from ragraph.tune.front import front as pareto
    from ragraph.tune.front import throughput
    from ragraph.tune.measure import Measurement

    lines = front.read_text(encoding="utf-8").splitlines()
    ms = [Measurement.from_json(json.loads(line)) for line in lines if line.strip()]
    seen: dict = {}
    for m in pareto(ms, throughput):
        seen.setdefault(m.point.quality, {"point": m.point.key, "em": m.em, "f1": m.f1,
                                          "recall": m.recall or 0.0})
    return list(seen.values())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workflow", type=Path, default=REPO / "workflows" / "hyde.rag")
    p.add_argument("--front", type=Path, required=True, help="tune's results or front file")
    p.add_argument("--questions", type=Path, default=Path("/work/shared/data/nq-open-dev.jsonl"))
    p.add_argument("--slo", type=float, default=2.0, help="p95 target, seconds")
    p.add_argument("--rate", type=float, default=None,
                   help="1x arrivals, requests/s (default: from the measured capacity)")
    p.add_argument("--overload", type=float, default=1.1,
                   help="the 2x rate as a multiple of the best point's measured capacity")
    p.add_argument("--probe-s", type=float, default=20.0, help="the capacity probe's length")
    p.add_argument("--phase-s", type=float, default=30.0)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--port", type=int, default=8731)
    p.add_argument("--adapt-first", action="store_true",
                   help="run the adaptive server first (the machine's load drifts between runs)")
    p.add_argument("--out", type=Path, default=Path("adapt_overload.json"))
    args = p.parse_args()
    points = level_quality(args.front)
    questions = [json.loads(line)["question"] for line in
                 args.questions.read_text(encoding="utf-8").splitlines()[:200]]
    rate, measured, runs = args.rate, None, []
    if rate is None and args.adapt_first:
        with server(args, adapt=False) as url:
            measured = probe(args, url, questions)
    for adapt in (True, False) if args.adapt_first else (False, True):
        with server(args, adapt) as url:
            if rate is None:
                measured = measured or probe(args, url, questions)
                rate = args.overload * measured / 2
            runs.append(run(args, url, adapt, rate, questions, points))
    report = {"levels": points, "slo_s": args.slo, "capacity_rps": measured, "rate": rate,
              "phase_s": args.phase_s, "runs": runs}
    args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    for r in runs:
        print("adapt" if r["adapt"] else "fixed", json.dumps(r["phases"]), r["points"],
              {k: round(100 * v, 1) for k, v in r["quality"].items()})


if __name__ == "__main__":
    main()
