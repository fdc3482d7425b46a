"""Query embedding a query, on CUDA (when present) and on the CPU, for the GPU acceptance run.

    python benchmarks/gpu_embedder.py [--questions 64] [--json FILE]

MiniLM queries (Natural Questions dev when ../shared/data is there, else a fixed list) embedded one
at a time and in batches of 16 and 64, in float64 and int8 (the query embedder's precisions: a
query's vector does not depend on its batch) and float32, packed as the query embedder runs them; then whether every
vector embedded alone equals the same query's vector in a batch, bit for bit, per device, and which
integer product int8 ran on each.
Not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from ragraph.bench.data.questions import FALLBACK, NQ_FILE
from ragraph.runtime.retrieval.embed.embedder import Embedder, EmbedderConfig

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def questions(count: int) -> list[str]:
    path = DATA / NQ_FILE
    if path.exists():
        lines = path.read_text(encoding="utf-8").splitlines()
        texts = [json.loads(line)["question"] for line in lines[:count]]
    else:
        texts = [q for q, _ in FALLBACK]
    return [texts[i % len(texts)] + ("" if i < len(texts) else f" ({i})") for i in range(count)]


def per_query_ms(embedder: Embedder, texts: list[str], batch: int, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for start in range(0, len(texts), batch):
            embedder.embed(texts[start : start + batch])
        best = min(best, time.perf_counter() - t0)
    return round(1000 * best / len(texts), 3)


def measure(device: str, texts: list[str]) -> dict:
    from ragraph.runtime.retrieval.embed.int8 import kernel

    out: dict = {"int8_kernel": kernel(device)}
    for precision in ("float64", "int8", "float32"):
        embedder = Embedder(EmbedderConfig(role="query", device=device, precision=precision,
                                           packed=True))
        embedder.embed(texts[:8])  # warm: kernels, allocator, CUDA context
        alone = np.stack([embedder.embed([t])[0] for t in texts])
        batched = embedder.embed(texts)
        out[precision] = {
            "ms_alone": per_query_ms(embedder, texts[:16], 1),
            "ms_batch16": per_query_ms(embedder, texts, 16),
            "ms_batch64": per_query_ms(embedder, texts, 64),
            "identical_alone_vs_batch": f"{int((alone == batched).all(axis=1).sum())}/{len(texts)}",
        }
    return out


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    texts = questions(args.questions)
    devices = ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]
    figures = {"questions": len(texts), "cpu_threads": torch.get_num_threads()}
    figures.update({device: measure(device, texts) for device in devices})
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
