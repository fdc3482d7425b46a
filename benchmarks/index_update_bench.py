"""What an in-place `index add` costs against a rebuild (issue 29: adding 10% more documents
costs at most 15% of a rebuild).

    python benchmarks/index_update_bench.py [--documents 4000] [--added 0.1] [--data DIR]

Real passages (the HotpotQA, MuSiQue and 2WikiMultihopQA corpora in ../shared/data, read from
there) are written as one Markdown document each into a temporary folder: `documents` of them are
built into an index, then `added` x `documents` more are added in place (`add_documents`), and the
whole set is built afresh (`build_index`), each through the same code as `ragraph index build
--docs` / `index add`, with the default MiniLM embedder. Times are wall-clock in one run on this
machine; the ratio is what the target is about. Not a test: timings depend on the machine's load.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ragraph.bench.measure.machine import detect
from ragraph.eval import load_corpus
from ragraph.runtime.retrieval.build.ingest import add_documents, build_index, passage_embedder

CORPORA = ("hotpotqa_train_corpus.json", "musique_train_corpus.json",
           "2wikimultihopqa_corpus.json")
DATA = Path(__file__).resolve().parents[1] / "../shared/data"


def write_documents(data: Path, folder: Path, count: int) -> list[Path]:
    passages = [p for name in CORPORA for p in load_corpus(data / name)]
    if len(passages) < count:
        raise SystemExit(f"only {len(passages)} passages in {data}, asked for {count}")
    folder.mkdir(parents=True)
    paths = []
    for i, p in enumerate(passages[:count]):
        path = folder / f"{i:06d}.md"
        path.write_text(f"# {p.title}\n\n{p.text}\n", encoding="utf-8")
        paths.append(path)
    return paths


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=4000)
    parser.add_argument("--added", type=float, default=0.1)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    extra = int(args.documents * args.added)
    embedder = passage_embedder()  # loaded once: model loading is not what is compared
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        docs = write_documents(args.data.resolve(), root / "docs", args.documents + extra)
        base, more = docs[: args.documents], docs[args.documents :]
        t_base, built = timed(lambda: build_index(base, root / "base", embedder=embedder))
        t_add, added = timed(lambda: add_documents(root / "base", more))
        t_rebuild, rebuilt = timed(lambda: build_index(docs, root / "full", embedder=embedder))
    print(f"machine: {detect().describe()}")
    print(f"documents: {args.documents} + {extra} added ({built.manifest.passages} + "
          f"{added.added} passages; the rebuild has {rebuilt.manifest.passages})")
    print(f"build {args.documents:>6} documents: {t_base:8.1f} s")
    print(f"add   {extra:>6} documents: {t_add:8.1f} s   (loads its embedder: included)")
    print(f"build {len(docs):>6} documents: {t_rebuild:8.1f} s")
    print(f"add / rebuild: {t_add / t_rebuild:.1%}  (target <= 15%)")
    print(f"lists after add: {added.balance.describe()}")


if __name__ == "__main__":
    main()
