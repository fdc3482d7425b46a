"""Retrieval quality, dense against hybrid: recall@k on the NQ and HotpotQA questions of
`../shared/data`, over one index of their passages among distractors, searched as the runtime
searches (`SearchService.search`, the same call every executor's result equals).

The corpus: the NQ oracle's gold passages (2,600), HotpotQA's 994 passages (gold and
distractors) and 2WikiMultihopQA's 6,119 Wikipedia passages as distractors, built once with
the default embedder (MiniLM) into `--index`. Recall@k: the share of a question's gold
passages among the top k (NQ: its gold passage, by text; HotpotQA: its supporting articles, by
title), and answer recall@k (a golden answer in the top k, FlashRAG's); and recall@5 when each
retriever's top 10, 20 or 50 are fused instead of its top 5. Latency: each
question searched dense, hybrid and keywords alone, the order rotating per question so a
busy machine slows each alike.

    python benchmarks/retrieval_quality.py --data ../shared/data --index /tmp/rq-index
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from ragraph.eval import load_corpus, load_dataset
from ragraph.eval.metrics import answer_recall_at_k, passage_recall_at_k
from ragraph.runtime.retrieval.options import SearchSpec, fuse

MODES = ("dense", "hybrid", "keywords")


@dataclass(frozen=True)
class Sets:
    name: str
    questions: list  # QAExample
    by: str  # how gold passages are matched: "text" or "title"


DISTRACTORS = ("hotpotqa_train_corpus.json", "2wikimultihopqa_corpus.json")


def corpus(data: Path, corpora: tuple[str, ...] = DISTRACTORS) -> list:
    """The passages to index, each once (title, text): the NQ gold passages and `corpora`."""
    from ragraph.runtime.retrieval.build.builder import CorpusRecord

    seen, out = set(), []
    nq = [p for ex in load_dataset(data / "nq-open-oracle.jsonl.gz") for p in ex.gold_passages]
    for p in (*nq, *(p for name in corpora for p in load_corpus(data / name))):
        if (p.title, p.text) not in seen:
            seen.add((p.title, p.text))
            out.append(CorpusRecord(None, p.title, p.text))
    return out


def ensure_index(data: Path, directory: Path, corpora: tuple[str, ...] = DISTRACTORS) -> None:
    from ragraph.runtime.retrieval.build.builder import BuildConfig, build_index
    from ragraph.runtime.retrieval.build.ingest import passage_embedder

    if (directory / "manifest.json").is_file():
        return
    records = corpus(data, corpora)
    build_index(records, directory, BuildConfig(), passage_embedder(), source="retrieval-quality")


def question_sets(data: Path, nq: int) -> list[Sets]:
    return [Sets("NQ", load_dataset(data / "nq-open-oracle.jsonl.gz", limit=nq), "text"),
            Sets("HotpotQA", load_dataset(data / "hotpotqa_train.json"), "title")]


def search_one(search, question: str, mode: str, k: int, nprobe: int | None) -> list:
    if mode == "keywords":
        ids = search.store.keyword_ids(question, k)
        return list(search.store.lookup(ids))
    return list(search.search(question, SearchSpec(k, mode), nprobe))


def measure(search, sets: Sets, k_values: tuple[int, ...], nprobe: int | None) -> dict:
    """Recall@k and answer recall@k per mode, and each mode's search latency."""
    deepest = max(k_values)
    recall = {m: {k: [] for k in k_values} for m in MODES}
    answer = {m: {k: [] for k in k_values} for m in MODES}
    seconds: dict[str, list[float]] = {m: [] for m in MODES}
    for i, ex in enumerate(sets.questions):
        for mode in MODES[i % 3:] + MODES[: i % 3]:
            start = time.perf_counter()
            found = search_one(search, ex.question, mode, deepest, nprobe)
            seconds[mode].append(time.perf_counter() - start)
            for k in k_values:
                # Hybrid at k fuses the top k of each: searched at each k, as a user asks it.
                top = found[:k] if mode != "hybrid" or k == deepest else search_one(
                    search, ex.question, mode, k, nprobe)
                recall[mode][k].append(passage_recall_at_k(top, ex.gold_passages, by=sets.by))
                answer[mode][k].append(answer_recall_at_k(top, ex.golden_answers))
    return {"questions": len(sets.questions), "modes": {m: {
        "recall": {k: statistics.fmean(v) for k, v in recall[m].items()},
        "answer_recall": {k: statistics.fmean(v) for k, v in answer[m].items()},
        "median_ms": statistics.median(seconds[m]) * 1e3,
        "mean_ms": statistics.fmean(seconds[m]) * 1e3} for m in MODES}}


def depth_sweep(search, sets: Sets, depths: tuple[int, ...], k: int,
                nprobe: int | None) -> dict[int, float]:
    """Recall@k of the fusion of each retriever's top `depth` (hybrid fuses their top k):
    whether deeper candidate lists would rank better."""
    out: dict[int, list[float]] = {d: [] for d in depths}
    for ex in sets.questions:
        dense = [p.id for p in search.search(ex.question, max(depths), nprobe)]
        words = search.store.keyword_ids(ex.question, max(depths))
        for d in depths:
            top = list(search.store.lookup(fuse([dense[:d], words[:d]], k)[0]))
            out[d].append(passage_recall_at_k(top, ex.gold_passages, by=sets.by))
    return {d: statistics.fmean(v) for d, v in out.items()}


def opened(index: Path, nprobe: int, threads: int):  # noqa: ANN201
    """The index's search service, as a run opens it (`threads`: faiss's and the embedder's)."""
    from ragraph.runtime.app import open_search
    from ragraph.runtime.config import RuntimeConfig

    config = RuntimeConfig.of(engine="sim", index=str(index), nprobe=nprobe,
                              search_threads=threads)
    return open_search(config, embed_threads=threads)


def parser(doc: str) -> argparse.ArgumentParser:
    """The options both quality scripts take."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--nprobe", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="faiss and embedding threads")
    p.add_argument("--out", type=Path, help="the results as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--index", type=Path, required=True, help="built here on first use")
    p.add_argument("--nq", type=int, default=300, help="NQ questions (the first N)")
    args = p.parse_args(argv)
    ensure_index(args.data, args.index)
    search = opened(args.index, args.nprobe, args.threads)
    results = {s.name: {**measure(search, s, (1, 5, 10), args.nprobe),
                        "fusion_depth_recall@5": depth_sweep(search, s, (5, 10, 20, 50), 5,
                                                             args.nprobe)}
               for s in question_sets(args.data, args.nq)}
    text = json.dumps({"passages": len(search.store), "nprobe": args.nprobe, **results}, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
