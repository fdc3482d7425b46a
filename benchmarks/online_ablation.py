"""The online pass ablation (`ragraph bench --ablation --rates ... --no-offline`) where the
default Wikipedia index is not built: the same cells, tables, CSV and plot, on a bench index
whose real part is the first passages of a shared-data corpus, embedded with the real MiniLM,
padded with synthetic vectors drawn around them (`bench.data.synthetic`, as every bench index).

    python benchmarks/online_ablation.py --rates 2,4,8 --workflows irg,multistep \
        --variants=-O0,-O2,'-O2 -speculate' --scale 400000 --nlist 512 --nprobe 256

Queries are the real benchmark questions (`bench.data.questions`), embedded by MiniLM: successive
rounds of a request share their locality as real text does. Not a test: timings depend on the
machine and its load. The index is cached under --cache (not the user's bench cache).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import numpy as np
from rich.console import Console

from ragraph.bench.data.index import IndexSpec, ensure_bench_index
from ragraph.bench.data.questions import load_questions
from ragraph.bench.data.realbase import RealBase, RealPassage
from ragraph.bench.output import plots, repeats, report
from ragraph.bench.output.results import write_csv
from ragraph.bench.run.config import BenchConfig
from ragraph.bench.run.driver import caption_for
from ragraph.bench.run.session import Workbench, load_graphs, run_cells
from ragraph.runtime.app import open_search

REPO = Path(__file__).resolve().parents[1]


def corpus_base(data: Path, passages: int, cache: Path) -> RealBase:
    """The first `passages` of HotpotQA's corpus, embedded once and cached under `cache`."""
    from ragraph.eval import load_corpus
    from ragraph.runtime.retrieval.embed.embedder import Embedder

    found = load_corpus(data / "hotpotqa_train_corpus.json", limit=passages)
    real = tuple(RealPassage(f"hotpotqa#{i}", p.title, p.text) for i, p in enumerate(found))
    saved = cache / f"hotpotqa-{len(real)}.npy"
    if saved.is_file():
        vectors = np.load(saved)
    else:
        vectors = Embedder().embed([f"{p.title}\n{p.text}" for p in real]).astype(np.float32)
        cache.mkdir(parents=True, exist_ok=True)
        np.save(saved, vectors)
    key = f"hotpotqa{len(real):08d}".ljust(64, "0")
    return RealBase(key, real, vectors, {"hotpotqa": len(real)}, ())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rates", required=True)
    p.add_argument("--workflows", default="irg,multistep")
    p.add_argument("--variants", default="-O0,-O2,-O2 -speculate")
    p.add_argument("--scale", type=int, default=400_000)
    p.add_argument("--nlist", type=int, default=512)
    p.add_argument("--nprobe", type=int, default=256)
    p.add_argument("--passages", type=int, default=2000)
    p.add_argument("--window", type=float, default=12.0)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--repeat", type=int, default=1, help="every cell N times in turn; the "
                   "tables and plot read each variant's median run, the CSV has every run")
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    p.add_argument("--cache", type=Path, default=Path("/tmp/ragraph-ablation"))
    p.add_argument("--out", type=Path, default=Path("bench-out"))
    args = p.parse_args()
    config = BenchConfig(
        workflows=tuple(args.workflows.split(",")), workflow_dir=REPO / "workflows",
        nprobes=(args.nprobe,), offline=False, ablation=True, mix=False, data=args.data,
        rates=tuple(float(r) for r in args.rates.split(",")), window_s=args.window,
        concurrencies=(args.concurrency,), out=args.out, scale=args.scale, nlist=args.nlist,
        variants_chosen=tuple(args.variants.split(",")), executors=("ragraph",),
        repeat=args.repeat)
    base = corpus_base(args.data, args.passages, args.cache)
    info = ensure_bench_index(args.cache, base, IndexSpec(args.scale, args.nlist))
    runtime = config.runtime(info.directory)
    search = open_search(runtime, embed_threads=1)
    bench = Workbench(config, load_graphs(config), load_questions(args.data), search, runtime)
    console = Console(highlight=False, width=220)

    def done(rows) -> None:
        for r in rows:
            s = r.summary
            console.log(f"{r.cell.workload} {r.cell.rate:g}/s {r.executor}: mean {s.mean_s:.2f} "
                        f"p50 {s.p50_s:.2f} p95 {s.p95_s:.2f}, spec {r.speculations}/"
                        f"{r.speculation_adopted}/{r.rollbacks}, warm {r.warm_searches}")

    rows = asyncio.run(run_cells(bench, lambda cell, total: lambda _o: None, done))
    caption = caption_for(config, info, rows[0].engine, rows[0].simulated)
    medians = repeats.medians(rows)
    report.print_all(console, medians, config.slo_s, "sim", caption, [], ablation=True)
    write_csv(args.out / "bench.csv", rows, {"caption": caption})
    for path in plots.latency_vs_rate(medians, args.out, caption, config.slo_s, ablation=True):
        console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
