"""Throughput through `ragraph serve` vs `ragraph run --input`, same requests, same concurrency.

`ragraph run WORKFLOW --input q.jsonl -c C` answers N questions with C in flight; then
`ragraph serve WORKFLOW -c C` answers the same N questions sent by C HTTP clients in a closed
loop (`ragraph bench --target`'s load generator, in this process). Both print requests per second
from the first request to the last answer; the answers must be identical.

    python benchmarks/serve_vs_run.py                      # simulated engine, embedded index
    python benchmarks/serve_vs_run.py --engine llamacpp --requests 48 --concurrency 8

On a 2-core machine the HTTP clients share the cores with the server: what is measured is the
whole cost of serving, client included.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from ragraph.bench.run.http_load import LoadSpec, drive
from ragraph.bench.run.target import requests_for

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workflow", default="oneshot")
    p.add_argument("--engine", default="sim")
    p.add_argument("--index", help="index directory (default: the embedded Wikipedia index)")
    p.add_argument("--requests", type=int, default=400)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3,
                   help="alternating run/serve rounds; the medians are compared (a shared "
                   "machine's load comes and goes)")
    p.add_argument("--gen-threads", type=int, help="llama.cpp threads (default: every core)")
    p.add_argument("--port", type=int, default=18731)
    args = p.parse_args()
    requests = requests_for((args.workflow,), args.requests, None, seed=0)
    common = [str(REPO / "workflows" / f"{args.workflow}.rag"), "--engine", args.engine,
              "-c", str(args.concurrency)] + (["--index", args.index] if args.index else [])
    common += ["--gen-threads", str(args.gen_threads)] if args.gen_threads else []
    runs, serves, same = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        questions = Path(tmp) / "questions.jsonl"
        questions.write_text("".join(json.dumps({"id": r.id, "question": r.question}) + "\n"
                                     for r in requests), encoding="utf-8")
        for _ in range(args.rounds):
            run_rps, run_answers = ragraph_run(common, questions, Path(tmp) / "answers.jsonl")
            serve_rps, serve_answers = through_server(common, requests, args)
            runs.append(run_rps)
            serves.append(serve_rps)
            same.append(sum(run_answers[r.id] == serve_answers[r.id] for r in requests))
            print(f"round {len(runs)}: run {run_rps:.2f} req/s, serve {serve_rps:.2f} req/s")
    run_rps, serve_rps = statistics.median(runs), statistics.median(serves)
    print(f"\n{args.requests} x {args.workflow}, engine {args.engine}, concurrency "
          f"{args.concurrency}, {os.cpu_count()} cores, median of {args.rounds} rounds")
    print(f"  ragraph run --input : {run_rps:8.2f} req/s")
    print(f"  ragraph serve (HTTP): {serve_rps:8.2f} req/s  ({serve_rps / run_rps:.1%} of run)")
    print(f"  identical answers   : {min(same)}/{len(requests)} (every round)")
    return 0 if min(same) == len(requests) and serve_rps >= 0.9 * run_rps else 1


def ragraph_run(common: list[str], questions: Path, out: Path) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "ragraph.cli.main", "run", *common, "--input", str(questions),
           "--output", str(out)]
    shown = subprocess.run(cmd, capture_output=True, text=True, check=True,
                           env={**os.environ, "COLUMNS": "200"}).stdout
    rps = float(re.search(r"throughput\s*│?\s*([\d.]+) req/s", shown).group(1))  # type: ignore[union-attr]
    answers = {row["id"]: row.get("answer") for row in map(json.loads, out.read_text().splitlines())}
    return rps, answers


def through_server(common: list[str], requests, args) -> tuple[float, dict]:  # noqa: ANN001
    cmd = [sys.executable, "-m", "ragraph.cli.main", "serve", *common, "--port", str(args.port),
           "--max-queue", str(args.requests)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{args.port}"
    try:
        _wait_ready(server, url)
        spec = LoadSpec(target=url, requests=len(requests), rate=None, clients=args.concurrency)
        report = asyncio.run(drive(spec, requests))
        answers = {r.id: s.answer for r, s in zip(requests, report.shots, strict=True)}
        if report.errors():
            print(f"server errors: {dict(report.errors())}")
        return report.throughput_rps, answers
    finally:
        server.terminate()
        server.wait(timeout=120)


def _wait_ready(server: subprocess.Popen, url: str, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"ragraph serve exited with {server.returncode}")
        try:
            if httpx.get(url + "/readiness", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)  # polling another process's socket: it offers no event
    raise SystemExit("ragraph serve did not become ready")


if __name__ == "__main__":
    sys.exit(main())
