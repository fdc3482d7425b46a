"""Answer quality, dense against hybrid: recall@k and the answer F1 of the real embedded LLM
(llama.cpp, Gemma-3-270M) on NQ, HotpotQA and MuSiQue from `../shared/data`, and on this
project's own `docs/` with the questions of `benchmarks/data/docs_questions.jsonl`, whose
Markdown is indexed twice: cut along its structure (as `index build --docs` cuts it) and as
plain text (the same splitter without Markdown structure or heading paths).

The QA corpus: the NQ oracle's gold passages, HotpotQA's and MuSiQue's passages (gold and
distractors) and 2WikiMultihopQA's as distractors, one index, built once into `--index`.
Retrieval is measured as `retrieval_quality.py` measures it (its `measure`: every mode at
k = 1, 5, 10, the modes' order rotating per question, so the latency ratio is within one run).
Answers: `workflows/oneshot.rag` (top 5, 24 tokens at most) over the same index, dense then
hybrid, each question's answer scored by token F1 and exact match against its golden answers.

    python benchmarks/answer_quality.py --data ../shared/data --work /tmp/aq --n 100 --out aq.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path

from retrieval_quality import MODES, Sets, ensure_index, measure, opened, parser, search_one

from ragraph.eval import exact_match, f1_score, load_dataset

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "benchmarks" / "data" / "docs_questions.jsonl"
WORKFLOW = ROOT / "workflows" / "oneshot.rag"
QA_CORPORA = ("hotpotqa_train_corpus.json", "musique_train_corpus.json",
              "2wikimultihopqa_corpus.json")
K_VALUES = (1, 5, 10)


@dataclass(frozen=True)
class DocQuestion:
    id: str
    question: str
    golden_answers: tuple[str, ...]
    source: str  # the file under docs/ that answers it


def docs_questions() -> list[DocQuestion]:
    lines = QUESTIONS.read_text(encoding="utf-8").splitlines()
    return [DocQuestion(r["id"], r["question"], tuple(r["golden_answers"]), r["source"])
            for r in map(json.loads, lines)]


def qa_sets(data: Path, n: int) -> list[Sets]:
    return [Sets("NQ", load_dataset(data / "nq-open-oracle.jsonl.gz", limit=n), "text"),
            Sets("HotpotQA", load_dataset(data / "hotpotqa_train.json", limit=n), "title"),
            Sets("MuSiQue", load_dataset(data / "musique_train.json", limit=n), "text")]


def build_docs(directory: Path, structured: bool) -> None:
    """`docs/` as `index build --docs` builds it, or with every file cut as plain text."""
    from ragraph.runtime.retrieval.build.builder import BuildConfig
    from ragraph.runtime.retrieval.build.builder import build_index as from_records
    from ragraph.runtime.retrieval.build.chunking import Chunker
    from ragraph.runtime.retrieval.build.ingest import cut_documents, passage_embedder

    if (directory / "manifest.json").is_file():
        return

    class PlainChunker(Chunker):
        def split(self, document):  # noqa: ANN001, ANN202
            return super().split(replace(document, kind="text"))

    embedder = passage_embedder()
    kind = Chunker if structured else PlainChunker
    chunker = kind(embedder.spec, None, getattr(embedder, "max_seq_length", None))
    cut = cut_documents([ROOT / "docs"], chunker)
    from_records(list(cut.records), directory, BuildConfig(), embedder,
                 source="docs", chunking=(chunker.tokens, chunker.overlap))


def docs_retrieval(search, questions: list[DocQuestion], nprobe: int) -> dict:
    """Recall@k: a top-k passage from the question's file; answer recall@k: an answer in one."""
    from ragraph.eval import answer_recall_at_k

    hit = {m: {k: [] for k in K_VALUES} for m in MODES}
    answer = {m: {k: [] for k in K_VALUES} for m in MODES}
    seconds: dict[str, list[float]] = {m: [] for m in MODES}
    for i, q in enumerate(questions):
        for mode in MODES[i % 3:] + MODES[: i % 3]:
            for k in K_VALUES:
                start = time.perf_counter()
                top = search_one(search, q.question, mode, k, nprobe)
                if k == 5:
                    seconds[mode].append(time.perf_counter() - start)
                files = [p.origin.source for p in top if p.origin is not None]
                hit[mode][k].append(float(any(f.endswith("docs/" + q.source) for f in files)))
                answer[mode][k].append(answer_recall_at_k(top, q.golden_answers))
    return {"questions": len(questions), "modes": {m: {
        "recall": {k: statistics.fmean(v) for k, v in hit[m].items()},
        "answer_recall": {k: statistics.fmean(v) for k, v in answer[m].items()},
        "median_ms": statistics.median(seconds[m]) * 1e3} for m in MODES}}


def answers(index: Path, questions: list, nprobe: int, ctx: int | None = None) -> dict:
    """The LLM's answers to `questions` over `index`, dense then hybrid: F1, EM, seconds.
    `ctx`: the model's context in tokens (None: ragraph's default)."""
    import ragraph

    out = {}
    asked = [{"id": q.id, "question": q.question} for q in questions]
    knobs = {} if ctx is None else {"ctx": ctx}
    with ragraph.Runtime(engine="llamacpp", index=str(index), nprobe=nprobe, **knobs) as rt:
        for mode in ("dense", "hybrid"):
            start = time.perf_counter()
            got = rt.batch(str(WORKFLOW), asked, mode=mode)
            wall = time.perf_counter() - start
            failed = [a.id for a in got if a.error is not None]
            if failed:
                raise SystemExit(f"{mode}: {len(failed)} questions failed, first {failed[0]}")
            f1 = [f1_score(a.answer or "", q.golden_answers) for a, q in zip(got, questions,
                                                                            strict=True)]
            em = [exact_match(a.answer or "", q.golden_answers) for a, q in zip(got, questions,
                                                                               strict=True)]
            out[mode] = {"f1": statistics.fmean(f1), "em": statistics.fmean(em),
                         "seconds": wall, "answers": [a.answer for a in got]}
    return out


def show(name: str, result: dict) -> None:
    """One part's figures as they come (the answers themselves only in `--out`)."""
    llm = {m: {k: v for k, v in r.items() if k != "answers"} for m, r in result.get("llm", {}).items()}
    print(json.dumps({name: {**result, "llm": llm}}), flush=True)


def qa_part(args: argparse.Namespace, search_of) -> dict:
    index = args.work / "qa-index"
    ensure_index(args.data, index, QA_CORPORA)
    search = search_of(index)
    results = {}
    for sets in (s for s in qa_sets(args.data, args.n) if s.name in args.sets):
        results[sets.name] = measure(search, sets, K_VALUES, args.nprobe)
        if not args.no_llm:
            results[sets.name]["llm"] = answers(index, sets.questions, args.nprobe, args.ctx)
        show(sets.name, results[sets.name])
    return {"passages": len(search.store), **results}


def docs_part(args: argparse.Namespace, search_of) -> dict:
    questions, results = docs_questions(), {}
    for name, structured in (("structure", True), ("plain", False)):
        index = args.work / f"docs-{name}"
        build_docs(index, structured)
        search = search_of(index)
        results[name] = {"passages": len(search.store),
                         **docs_retrieval(search, questions, args.nprobe)}
        if not args.no_llm:
            results[name]["llm"] = answers(index, questions, args.nprobe, args.ctx)
        show(name, results[name])
    return results


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--work", type=Path, required=True, help="indexes built here on first use")
    p.add_argument("--n", type=int, default=100, help="questions a QA dataset (the first N)")
    p.add_argument("--part", choices=("qa", "docs", "all"), default="all")
    p.add_argument("--no-llm", action="store_true", help="retrieval only")
    p.add_argument("--ctx", type=int, help="the model's context in tokens (MuSiQue's long "
                   "passages need 4096: one prompt of 2,247 tokens)")
    p.add_argument("--sets", type=lambda v: v.split(","), default=["NQ", "HotpotQA", "MuSiQue"],
                   help="the QA datasets, comma-separated (one a process runs them at once)")
    args = p.parse_args(argv)

    def search_of(index: Path):  # noqa: ANN202
        return opened(index, args.nprobe, args.threads)

    args.work.mkdir(parents=True, exist_ok=True)
    results = {"nprobe": args.nprobe, "n": args.n}
    for part, run in (("docs", docs_part), ("qa", qa_part)):
        if args.part in (part, "all"):
            results[part] = run(args, search_of)
            if args.out is not None:  # each part as it ends: a long run keeps what it has
                args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
