"""Throughput of the Python API against the scheduler it wraps, same questions, one run.

Three ways to answer the same N questions with the same workflow, engine and concurrency:

    execute   the scheduler with every request there at once (`runtime.app.execute`: what
              `ragraph run --input` called before the API, and what `ragraph bench` calls)
    batch     `rt.batch(wf, questions)` (what `ragraph run --input` calls now)
    threads   N threads, each calling `rt.run(wf, question)` at once

Each opens its engines first; only the answering is timed (first request in to last answer
out). Rounds alternate the order (a shared machine's load comes and goes); the table gives
each round, the medians and the ratios to `execute`, and whether every answer was the same.

    python benchmarks/python_api.py                               # simulated engine
    python benchmarks/python_api.py --engine llamacpp --requests 16
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

import ragraph
from ragraph.bench.measure.machine import detect
from ragraph.bench.run.target import requests_for
from ragraph.runtime.app import execute, open_search, open_services
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.retrieval.ivf.cost import calibrated

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workflow", default="hyde")
    p.add_argument("--engine", default="sim")
    p.add_argument("--index", help="index directory (default: the embedded Wikipedia index)")
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    config = RuntimeConfig.of(engine=args.engine, index=args.index, concurrency=args.concurrency)
    wf = ragraph.load(REPO / "workflows" / f"{args.workflow}.rag", config.scheduler.passes)
    questions = [r.question for r in requests_for((args.workflow,), args.requests, None, seed=0)]
    search = open_search(config)  # shared: the index and embedder load once
    calibrated(search.engine)  # once per engine, before any timing (every way reuses it)
    ways = {"execute": by_execute, "batch": by_batch, "threads": by_threads}
    rps: dict[str, list[float]] = {name: [] for name in ways}
    answers: dict[str, list] = {}
    for round_ in range(args.rounds):
        order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
        for name in order:
            wall, got = ways[name](config, search, wf, questions)
            rps[name].append(len(questions) / wall)
            answers.setdefault(name, got)
        print(f"round {round_ + 1}: " + ", ".join(f"{n} {rps[n][-1]:.2f} req/s" for n in ways),
              flush=True)
    machine = detect()
    base = statistics.median(rps["execute"])
    print(f"\n{args.requests} x {args.workflow}, engine {args.engine}, concurrency "
          f"{args.concurrency}, {args.rounds} rounds; {machine.describe()}")
    print("| way | req/s per round | median | vs execute |\n|---|---|---|---|")
    for name in ways:
        med = statistics.median(rps[name])
        rounds = " / ".join(f"{r:.2f}" for r in rps[name])
        print(f"| {name} | {rounds} | {med:.2f} | {med / base:.1%} |")
    same = {n: sum(a == b for a, b in zip(answers[n], answers["execute"], strict=True))
            for n in ways}
    print("identical answers to execute: " + ", ".join(f"{n} {same[n]}/{len(questions)}"
                                                        for n in ways))
    return 0


def by_execute(config: RuntimeConfig, search, wf, questions: list[str]):  # noqa: ANN001
    from ragraph.runtime.request import Request

    async def run():
        async with open_services(config, search) as services:
            requests = [Request(id=f"q{i}", question=q) for i, q in enumerate(questions)]
            start = time.perf_counter()
            result = await execute(wf, requests, config, services)
            wall = time.perf_counter() - start
        by_id = {o.rid: o.answer for o in result.outcomes}
        return wall, [by_id[f"q{i}"] for i in range(len(questions))]

    return asyncio.run(run())


def by_batch(config: RuntimeConfig, search, wf, questions: list[str]):  # noqa: ANN001
    with ragraph.Runtime(config, search=search) as rt:
        start = time.perf_counter()
        answers = rt.batch(wf, questions)
        wall = time.perf_counter() - start
    return wall, [a.answer for a in answers]


def by_threads(config: RuntimeConfig, search, wf, questions: list[str]):  # noqa: ANN001
    answers: list = [None] * len(questions)
    with ragraph.Runtime(config, search=search) as rt:
        gate = threading.Barrier(len(questions) + 1)

        def ask(i: int) -> None:
            gate.wait()
            answers[i] = rt.run(wf, questions[i]).answer

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(questions))]
        for t in threads:
            t.start()
        gate.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
    return wall, answers


if __name__ == "__main__":
    sys.exit(main())
