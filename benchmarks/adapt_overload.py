"""`serve --adapt` under an overload phase: p95 with and without adaptation, and what it costs in
answer quality (issue 32).

    python benchmarks/adapt_overload.py --front hyde.tune.jsonl --slo 2 --rate 4 [--phase-s 30]

Runs `ragraph serve WORKFLOW --engine sim` twice, fixed at the front's best-quality point and
with `--adapt FRONT --adapt-slo p95=SLO`, and sends each the same open-loop Poisson arrivals:
`--rate` requests/s (1x), then twice that (2x), then 1x again, each for `--phase-s`. Prints, per
run and phase, the requests answered, their p95 and mean latency, and for the adaptive run the
points the requests went to (from /metrics) and the quality of those points as tune measured them
(EM, F1, recall on its dev questions), weighted by the requests each served. Writes the numbers as
JSON (`--out`); each server's log, the adaptive one's switches included, goes to
$TMPDIR/adapt-bench-{fixed,adapt}.log. Not a test: timings depend on the machine and its load.
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


async def drive(url: str, workflow: str, questions: list[str], rate: float, phase_s: float,
                seed: int) -> dict[str, list[float]]:
    """Open-loop arrivals, phase by phase; each phase's latencies of answered requests."""
    rng = random.Random(seed)
    latencies: dict[str, list[float]] = {name: [] for name, _ in PHASES}
    tasks = []
    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=1000)) as client:

        async def one(phase: str, question: str) -> None:
            t0 = time.perf_counter()
            r = await client.post(url + "/runs/wait",
                                  json={"workflow": workflow, "input": {"question": question}})
            if r.status_code == 200:
                latencies[phase].append(time.perf_counter() - t0)

        i = 0
        for phase, scale in PHASES:
            end = time.perf_counter() + phase_s
            while (now := time.perf_counter()) < end:
                tasks.append(asyncio.create_task(one(phase, questions[i % len(questions)])))
                i += 1
                await asyncio.sleep(min(rng.expovariate(rate * scale), max(end - now, 0)))
        await asyncio.gather(*tasks)
    return latencies


def routed(url: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", timeout=10).text
    return {s.labels["point"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "ragraph_adapt_requests_total"}


def run(args: argparse.Namespace, port: int, adapt: bool, points: list[dict]) -> dict:
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
    proc = serve(workflow, port, extra, "adapt" if adapt else "fixed")
    url = f"http://127.0.0.1:{port}"
    try:
        questions = [json.loads(line)["question"] for line in
                     args.questions.read_text(encoding="utf-8").splitlines()[:200]]
        lat = asyncio.run(drive(url, args.workflow.stem, questions, args.rate, args.phase_s, 0))
        counts = routed(url) if adapt else {"0": float(sum(len(v) for v in lat.values()))}
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    from ragraph.serve.adapt import p95

    return {"adapt": adapt, "phases": {name: {"answered": len(v), "p95_s": p95(v),
                                              "mean_s": sum(v) / len(v) if v else None}
                                       for name, v in lat.items()},
            "points": counts, "quality": weighted(points, counts)}


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
    p.add_argument("--rate", type=float, default=4.0, help="1x arrivals, requests/s")
    p.add_argument("--phase-s", type=float, default=30.0)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--port", type=int, default=8731)
    p.add_argument("--adapt-first", action="store_true",
                   help="run the adaptive server first (the machine's load drifts between runs)")
    p.add_argument("--out", type=Path, default=Path("adapt_overload.json"))
    args = p.parse_args()
    points = level_quality(args.front)
    report = {"levels": points, "slo_s": args.slo, "rate": args.rate, "phase_s": args.phase_s,
              "runs": [run(args, args.port, adapt, points)
                       for adapt in ((True, False) if args.adapt_first else (False, True))]}
    args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    for r in report["runs"]:
        print("adapt" if r["adapt"] else "fixed", json.dumps(r["phases"]), r["points"],
              {k: round(100 * v, 1) for k, v in r["quality"].items()})


if __name__ == "__main__":
    main()
