"""Stepwise IVF search vs one-shot faiss, hot-cluster skew and early completion on real queries.

    python benchmarks/search_bench.py [--data ../shared/data] [--questions 1000] [--repeats 3]

Uses the default Wikipedia index (built on first use) and Natural Questions dev questions as the
query load. Prints:
1. time of stepwise search (probe once, steps of s clusters for all queries of a batch in one call,
   exact merge) over faiss `index.search` (its default parallel mode) at nprobe 32 and 128, batch
   1, 8, 32, s = 4, 8, 16; the target is a ratio <= 1.10;
2. the share of probed-cluster work (vectors scanned) in the hottest 20% of clusters (HedraRAG: 69%)
   and what a hot cache of that size serves when it is swapped every 50 steps;
3. the distribution of the early-completion point (fraction of the probe list after which the final
   top-10 was complete), in probe order;
4. one step holding whole probe lists of 8, 32 and 64 queries, laid out in cluster order
   (queries sharing a list scan it back to back) over query order (a batched faiss search's),
   with the share of (query, list) pairs whose list another query of the step reads.
5. with `--list-major N[,N...]` (only this table): 64 concurrent queries on N clustered random
   vectors of dimension 384 (IVF-Flat, inner product, `--nlist` lists) at nprobe 128 and 256,
   queries/s of faiss's batch search, a thread pool of single-query searches (what an app does),
   the stepwise engine in cluster order (one step of whole probe lists), list-major on the CPU
   (the same step in list order) and list-major over the lists held on `--device` (one product
   a chunk, `tier.devicelists`), all with identical results.
Not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ragraph.runtime.retrieval.build.corpus import ensure_default_index
from ragraph.runtime.retrieval.embed.embedder import Embedder
from ragraph.runtime.retrieval.ivf.locality import completion_point
from ragraph.runtime.retrieval.protocol import ScanOrder, SearchTask

K = 10


def stepwise_batch(engine, queries: np.ndarray, nprobe: int, step: int) -> np.ndarray:
    probe = engine.probe(queries, nprobe)
    partials = [[] for _ in queries]
    for start in range(0, nprobe, step):
        tasks = [
            SearchTask.of(q, p[start : start + step]) for q, p in zip(queries, probe, strict=True)
        ]
        for i, part in enumerate(engine.search_step(tasks, K).partials):
            partials[i].append(part)
    return np.stack(
        [engine.finish(q, p, ps, K).ids for q, p, ps in zip(queries, probe, partials, strict=True)]
    )


def overhead_row(engine, reference_index, batches: list[np.ndarray], nprobe: int, repeats: int):
    """faiss seconds for all batches, and stepwise/faiss for steps of 4, 8, 16 clusters."""
    reference_index.nprobe = nprobe
    runs = {0: lambda: [reference_index.search(b, K) for b in batches]}
    runs.update({s: lambda s=s: [stepwise_batch(engine, b, nprobe, s) for b in batches]
                 for s in (4, 8, 16)})
    best, _ = _interleaved(runs, repeats)
    return best[0], [best[s] / best[0] for s in (4, 8, 16)]


def overhead_table(engine, reference_index, queries: np.ndarray, repeats: int) -> None:
    print("\n1. stepwise / one-shot faiss time (same queries, same results; lower is better)")
    head = " ".join(f"{'s=' + str(s):>8}" for s in (4, 8, 16))
    print(f"{'nprobe':>6} {'batch':>5} {'faiss ms/q':>10} {head}")
    for nprobe in (32, 128):
        for batch in (1, 8, 32):
            n = (len(queries) // batch) * batch
            batches = [queries[i : i + batch] for i in range(0, n, batch)]
            base, ratios = overhead_row(engine, reference_index, batches, nprobe, repeats)
            cells = " ".join(f"{r:8.2f}" for r in ratios)
            print(f"{nprobe:>6} {batch:>5} {1e3 * base / n:10.3f} {cells}")


def order_table(engine, queries: np.ndarray, repeats: int) -> None:
    print("\n4. one step of whole probe lists: cluster order / query order time (lower is better)")
    print(f"{'nprobe':>6} {'batch':>5} {'shared':>7} {'query ms/q':>10} {'cluster':>8}")
    for nprobe in (32, 128):
        for batch in (8, 32, 64):
            x = queries[:batch]
            probe = engine.probe(x, nprobe)
            tasks = [SearchTask.of(q, p) for q, p in zip(x, probe, strict=True)]
            _, count = np.unique(probe, return_counts=True)
            shared = count[count > 1].sum() / probe.size
            best, _ = _interleaved({o: lambda o=o, t=tasks: engine.search_step(t, K, o)
                                    for o in (ScanOrder.BALANCED, ScanOrder.CLUSTER)}, repeats)
            base = best[ScanOrder.BALANCED]
            print(f"{nprobe:>6} {len(x):>5} {shared:7.0%} {1e3 * base / len(x):10.3f} "
                  f"{best[ScanOrder.CLUSTER] / base:8.2f}")


def clustered_index(n: int, d: int, nlist: int, rng: np.random.Generator):
    """An IVF-Flat inner-product index of `n` normalized vectors around 1,024 random centers,
    and the vectors."""
    import faiss

    centers = rng.standard_normal((1024, d)).astype(np.float32)
    x = np.empty((n, d), dtype=np.float32)
    for start in range(0, n, 1 << 18):  # in slices: the float64 noise of 2M vectors is 6 GB
        m = min(1 << 18, n - start)
        v = centers[rng.integers(0, 1024, m)] + 0.5 * rng.standard_normal((m, d), np.float32)
        x[start:start + m] = v / np.linalg.norm(v, axis=1, keepdims=True)
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
    index.train(x[rng.choice(n, min(n, nlist * 64), replace=False)])
    index.add(x)
    return index, x


def synthetic_table(n: int, queries: np.ndarray, repeats: int) -> None:
    """The same table on `n` clustered random vectors: per-cluster work like a large index."""
    import faiss

    from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine

    rng = np.random.default_rng(0)
    index, x = clustered_index(n, queries.shape[1], 256, rng)
    reference = faiss.clone_index(index)
    print(f"\n   synthetic: {n} vectors, nlist 256 (~{n // 256} per cluster)")
    q = x[rng.choice(n, queries.shape[0], replace=False)]
    overhead_table(FaissIVFEngine(index), reference, q, repeats)
    order_table(FaissIVFEngine(index), q, repeats)


def list_major_table(n: int, nlist: int, repeats: int, device: str, batch: int = 64) -> None:
    """Table 5: `batch` concurrent queries, five ways to answer them, queries/s."""
    import faiss

    from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine
    from ragraph.runtime.retrieval.tier.devicelists import DeviceLists, scan_step

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    index, x = clustered_index(n, 384, nlist, rng)
    q = x[rng.choice(n, batch, replace=False)] + 0.02 * rng.standard_normal((batch, 384), np.float32)
    del x
    engine = FaissIVFEngine(index)  # sets the index's parallel_mode 3: the baselines reset it
    built = time.perf_counter() - t0
    lists = DeviceLists.of(index, device)
    threads = faiss.omp_get_max_threads()
    print(f"\n5. {batch} concurrent queries, {n} vectors, d 384, IVF{nlist} (built in {built:.0f} s,"
          f" lists to {device} in {time.perf_counter() - t0 - built:.1f} s), {threads} threads: "
          f"queries/s (higher is better)")
    print(f"{'nprobe':>6} {'q/list':>6} {'faiss batch':>11} {'thread pool':>11} {'cluster':>8} "
          f"{'list cpu':>8} {'list ' + device:>9} {'dev/pool':>8} {'cpu/pool':>8} "
          f"{'identical':>9}")
    pool = ThreadPoolExecutor(threads)
    for nprobe in (128, 256):
        runs = {
            "batch": lambda nprobe=nprobe: _faiss_search(index, nprobe, lambda: index.search(q, K)),
            "pool": lambda nprobe=nprobe: _faiss_search(index, nprobe, lambda: np.concatenate(
                [i for _, i in pool.map(lambda v: index.search(v[None], K), q)])),
            "cluster": lambda nprobe=nprobe: one_step(engine, q, nprobe, ScanOrder.CLUSTER),
            "list": lambda nprobe=nprobe: one_step(engine, q, nprobe, ScanOrder.LIST),
            "device": lambda nprobe=nprobe: one_step(
                engine, q, nprobe, partials=lambda tasks: scan_step(engine, lists, tasks, K)),
        }
        best, ids = _interleaved(runs, repeats)
        same = all(np.array_equal(ids["batch"], i) for i in ids.values())
        rate = {name: batch / s for name, s in best.items()}
        probe = engine.probe(q, nprobe)
        shared = probe.size / np.unique(probe).size  # queries per list the step reads
        print(f"{nprobe:>6} {shared:6.1f} {rate['batch']:11.0f} {rate['pool']:11.0f} "
              f"{rate['cluster']:8.0f} {rate['list']:8.0f} {rate['device']:9.0f} "
              f"{rate['device'] / rate['pool']:8.2f} {rate['list'] / rate['pool']:8.2f} "
              f"{'yes' if same else 'NO':>9}")
    pool.shutdown()


def one_step(engine, queries: np.ndarray, nprobe: int, order: ScanOrder = ScanOrder.LIST,
             partials=None) -> np.ndarray:
    """Probe, one step of every query's whole probe list in `order` (or by `partials`, the
    tasks' partials another way), finish: the ids."""
    probe = engine.probe(queries, nprobe)
    tasks = [SearchTask.of(v, p) for v, p in zip(queries, probe, strict=True)]
    parts = partials(tasks) if partials else engine.search_step(tasks, K, order).partials
    return np.stack([engine.finish(v, p, [part], K).ids
                     for v, p, part in zip(queries, probe, parts, strict=True)])


def _faiss_search(index, nprobe: int, search) -> np.ndarray:
    """faiss's own search in its default parallel mode, as an app calls it."""
    mode, index.nprobe, index.parallel_mode = index.parallel_mode, nprobe, 0
    try:
        out = search()
        return out[1] if isinstance(out, tuple) else out
    finally:
        index.parallel_mode = mode


def _interleaved(runs: dict, repeats: int) -> tuple[dict, dict]:
    """Best seconds of each run over `repeats` rounds (interleaved: load from other processes
    hits all alike), and each run's last output."""
    best = dict.fromkeys(runs, float("inf"))
    out = {}
    for _ in range(repeats):
        for name, run in runs.items():
            t0 = time.perf_counter()
            out[name] = run()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best, out


def skew_and_completion(engine, queries: np.ndarray, nprobe: int) -> None:
    sizes = engine.cluster_sizes()
    probe = engine.probe(queries, nprobe)
    counts = np.bincount(probe.reshape(-1), minlength=engine.nlist)
    work = counts * sizes
    hot = np.argsort(-counts, kind="stable")[: max(1, engine.nlist // 5)]
    by_work = np.sort(work)[::-1][: max(1, engine.nlist // 5)]
    print(f"\n2. nprobe {nprobe}: hottest 20% of clusters ({hot.size} of {engine.nlist})")
    print(f"   share of work, clusters ranked by access count: {work[hot].sum() / work.sum():.1%}")
    print(f"   share of work, clusters ranked by work:         {by_work.sum() / work.sum():.1%}")
    _, ids = engine.search(queries, K, nprobe)
    points = np.array(
        [completion_point(engine.cluster_of(i[i >= 0]), p) for i, p in zip(ids, probe, strict=True)]
    )
    frac = points / nprobe
    q = np.percentile(frac, [10, 25, 50, 75, 90, 95])
    print(
        f"3. nprobe {nprobe}: early-completion point as a fraction of the probe list (probe order)"
    )
    print("   p10 {:.0%}  p25 {:.0%}  p50 {:.0%}  p75 {:.0%}  p90 {:.0%}  p95 {:.0%}".format(*q))
    print(
        f"   mean {frac.mean():.0%}; complete within the first 25% of clusters: {(frac <= 0.25).mean():.0%},"
        f" 50%: {(frac <= 0.5).mean():.0%}"
    )


def served_by_cache(engine, queries: np.ndarray, nprobe: int) -> None:
    from ragraph.runtime.retrieval.tier.hotcache import HotCacheConfig, HotClusterCache
    from ragraph.runtime.retrieval.tier.tiered import TieredEngine

    cache = HotClusterCache(engine, HotCacheConfig(capacity=engine.nlist // 5, swap_every=50))
    tiered = TieredEngine(engine, cache)
    for b in range(0, len(queries), 8):
        batch = queries[b : b + 8]
        stepwise_batch(tiered, batch, nprobe, 8)
    cache.wait_for_swap()
    stats = cache.stats()
    print(
        f"   hot cache of 20% of clusters ({cache.device}), swap every 50 steps, nprobe {nprobe}:"
        f" {stats.served_fraction:.1%} of scanned vectors served over {stats.steps} steps"
    )
    cache.close()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[1] / "../shared/data"
    )
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--timing-queries", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="OpenMP threads (0: faiss default)")
    parser.add_argument(
        "--synthetic",
        type=int,
        default=0,
        help="also time a synthetic index of this many vectors (nlist 256: realistic cluster sizes)",
    )
    parser.add_argument("--list-major", type=_ints, default=(), metavar="N[,N...]",
                        help="only table 5, on N synthetic vectors (e.g. 1000000,4000000)")
    parser.add_argument("--nlist", type=_ints, default=(1024,),
                        help="lists of each table-5 index (one, or one per --list-major size)")
    parser.add_argument("--device", default=None,
                        help="where table 5's device lists go (default: cuda if present, else cpu)")
    return parser.parse_args()


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def main() -> None:
    args = parse_args()
    import faiss

    if args.threads:
        faiss.omp_set_num_threads(args.threads)
    if args.list_major:
        device = args.device or ("cuda" if _cuda() else "cpu")
        nlists = args.nlist * len(args.list_major) if len(args.nlist) == 1 else args.nlist
        for n, nlist in zip(args.list_major, nlists, strict=True):
            list_major_table(n, nlist, args.repeats, device)
        return

    loaded = ensure_default_index()
    print(
        f"index: {loaded.manifest.passages} passages, nlist {loaded.manifest.nlist}, "
        f"{loaded.manifest.metric}; faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads"
    )
    with (args.data / "nq-open-dev.jsonl").open(encoding="utf-8") as f:
        questions = [json.loads(line)["question"] for line in f][: args.questions]
    queries = Embedder().embed(questions)
    reference = faiss.read_index(str(loaded.directory / "index.faiss"))  # parallel_mode 0
    overhead_table(loaded.engine, reference, queries[: args.timing_queries], args.repeats)
    order_table(loaded.engine, queries[: args.timing_queries], args.repeats)
    if args.synthetic:
        synthetic_table(args.synthetic, queries[: args.timing_queries], args.repeats)
    for nprobe in (32, 128):
        skew_and_completion(loaded.engine, queries, nprobe)
        served_by_cache(loaded.engine, queries, nprobe)


if __name__ == "__main__":
    main()
