"""What a query costs to embed, float64 against int8 (the two batch-invariant query precisions).

    python benchmarks/query_embedders.py [--questions 256] [--rounds 5] [--threads 2]

MiniLM queries (Natural Questions dev when ../shared/data is there, else a fixed list), packed as
the query embedder runs them, one at a time and in batches of 16 and 64. The two precisions run
alternately within each round (which goes first alternates too), so a machine shared with other
jobs loads both alike; the ratio is taken per round and the median reported. Not a test: timings
depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from dataclasses import replace

from gpu_embedder import questions

from ragraph.runtime.retrieval.embed import int8
from ragraph.runtime.retrieval.embed.embedder import Embedder, query_embedder
from ragraph.runtime.retrieval.embed.spec import MINILM

BATCHES = (1, 16, 64)


def per_query_ms(embedder: Embedder, texts: list[str], batch: int) -> tuple[float, float]:
    """Wall-clock and CPU milliseconds a query (CPU time: all of the process's threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(texts), batch):
        embedder.embed(texts[start:start + batch])
    return (1000 * (time.perf_counter() - wall) / len(texts),
            1000 * (time.process_time() - cpu) / len(texts))


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        return f"{names[0]} x{len(names)}"
    except (OSError, IndexError):
        return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    texts = questions(args.questions)
    embedders = {p: query_embedder(replace(MINILM, query_precision=p), threads=args.threads)
                 for p in ("float64", "int8")}
    for embedder in embedders.values():
        embedder.embed(texts[:16])  # warm: kernels, allocator
    times: dict = {(p, b): [] for p in embedders for b in BATCHES}
    for round_ in range(args.rounds):
        for batch in BATCHES:
            order = list(embedders) if round_ % 2 == 0 else list(embedders)[::-1]
            sample = texts[:32] if batch == 1 else texts
            for precision in order:
                times[precision, batch].append(per_query_ms(embedders[precision], sample, batch))
    figures = {"cpu": cpu_name(), "threads": args.threads, "kernel": int8.kernel(),
               "questions": len(texts), "rounds": args.rounds}
    for batch in BATCHES:
        for clock, name in ((0, "wall"), (1, "cpu")):
            f64 = [t[clock] for t in times["float64", batch]]
            i8 = [t[clock] for t in times["int8", batch]]
            ratios = [a / b for a, b in zip(f64, i8, strict=True)]
            figures[f"batch {batch}, {name}"] = {
                "float64_ms": round(statistics.median(f64), 3),
                "int8_ms": round(statistics.median(i8), 3),
                "ratio_median": round(statistics.median(ratios), 2),
                "ratio_range": [round(min(ratios), 2), round(max(ratios), 2)],
            }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
