"""`ragraph index build|add|delete|default|shard|info`: build, change, verify and describe search
indexes (add and delete: cmd_index_docs.py).

faiss, torch and the embedder are imported inside the command functions so that other commands
(and `ragraph --help`) start without loading them.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console

from ragraph.cli.cmd_index_docs import add_chunk_flags, build_docs, register_changes
from ragraph.console import new_console


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("index", help="build and inspect search indexes")
    sub = parser.add_subparsers(dest="index_command", required=True, metavar="ACTION")

    build = sub.add_parser("build", help="build a faiss IVF index + passage store from a corpus "
                           "or from documents")
    given = build.add_mutually_exclusive_group(required=True)
    given.add_argument("--corpus", type=Path,
                       help="JSONL lines {id?, title, text}, or a corpus or QA dataset file in a "
                            "format `ragraph eval` reads (its unique passages: e.g. the gold "
                            "passages of the NQ oracle, the HotpotQA/MuSiQue corpora)")
    given.add_argument("--docs", type=Path, nargs="+", metavar="PATH",
                       help="text, Markdown, HTML and PDF files, and folders of them (recursive),"
                            " cut into passages by the embedder's tokens")
    add_chunk_flags(build)
    build.add_argument("--out", type=Path, required=True, help="new index directory")
    build.add_argument("--nlist", type=int, default=None, help="IVF clusters (default ~4·sqrt(n))")
    build.add_argument("--index-type", choices=("ivf-flat", "flat", "sq8"), default="ivf-flat")
    build.add_argument("--metric", choices=("ip", "l2"), default="ip")
    build.add_argument("--embedder", metavar="NAME_OR_PATH",
                       help="a sentence-transformers model: its directory, or its name in the "
                       "local Hugging Face cache (never downloaded); default all-MiniLM-L6-v2. "
                       "With --embedder-url: the model name to ask the server for")
    build.add_argument("--embedder-url", metavar="URL",
                       help="embed with this OpenAI-compatible /v1/embeddings server instead")
    build.add_argument("--query-prompt", metavar="TEXT",
                       help="put in front of every query (default: the model's own, e.g. e5's "
                       "'query: '); recorded in the index")
    build.add_argument("--passage-prompt", metavar="TEXT",
                       help="put in front of every passage (default: the model's own)")
    build.set_defaults(func=_build)
    register_changes(sub)

    default = sub.add_parser("default", help="build (once) or verify the default Wikipedia index")
    default.set_defaults(func=_default)

    shard = sub.add_parser("shard", help="split an index's lists into shard files for --ray")
    shard.add_argument("directory", type=Path, help="an index directory (ragraph index build)")
    shard.add_argument("--shards", type=int, required=True, help="number of shard actors")
    shard.add_argument("--replicate", type=float, default=0.1,
                       help="share of the lists, the largest, held by two shards (0.1)")
    shard.set_defaults(func=_shard)

    info = sub.add_parser("info", help="describe an index directory")
    info.add_argument("directory", type=Path)
    info.set_defaults(func=_info)


@contextlib.contextmanager
def progress_bar(
    console: Console, label: str, transient: bool = False
) -> Iterator[Callable[[int], Callable[[int], None]]]:
    """A passages progress bar; yields `start(total, stage=None) -> advance(n)`, drawn only once
    started (`stage` names a stage other than the bar's own). Off a terminal, where rich draws no
    bar, each stage logs a line as it starts and at every tenth of the way, as the bench does: a
    long build in a log says where it is."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=transient) as bar:

        def start(total: int, stage: str | None = None) -> Callable[[int], None]:
            # A stage's label names its unit ("cutting documents"); the bar's own counts passages.
            task = bar.add_task(stage or label, total=total, unit="" if stage else "passages")
            advance = lambda n: bar.advance(task, n)  # noqa: E731
            return advance if console.is_terminal else _logged(console, stage or label, total,
                                                               advance)

        yield start


def _logged(console: Console, label: str, total: int,
            advance: Callable[[int], None]) -> Callable[[int], None]:
    console.log(f"{label}: 0/{total:,}")
    done, tenth = 0, 1

    def step(n: int) -> None:
        nonlocal done, tenth
        advance(n)
        done += n
        if total and done * 10 >= tenth * total:
            console.log(f"{label}: {done:,}/{total:,}")
            tenth = done * 10 // total + 1

    return step


def _build(args: argparse.Namespace) -> int:
    from ragraph.runtime.retrieval.build.builder import BuildConfig, build_index

    console = new_console(stderr=True)
    config = BuildConfig(index_type=args.index_type, nlist=args.nlist, metric=args.metric)
    if args.docs:
        return build_docs(args, config, console)
    records = records_of(args.corpus)
    config.clusters_for(len(records))  # a bad --nlist fails before minutes of embedding
    embedder = _passage_embedder(args)
    console.print(f"embedder {embedder.spec.describe()}")
    with progress_bar(console, "embedding") as start:
        tick = start(len(records))
        manifest = build_index(records, args.out, config, embedder, tick, source=str(args.corpus))
    console.print(
        f"built {args.out}: {manifest.passages} passages, {manifest.index_type}, "
        f"nlist {manifest.nlist}, {manifest.metric}, dim {manifest.dim}"
    )
    return 0


def _passage_embedder(args: argparse.Namespace):
    """The local sentence-transformers model of --embedder, or the --embedder-url server."""
    from ragraph.runtime.retrieval.build.ingest import passage_embedder

    return passage_embedder(args.embedder, args.embedder_url, args.query_prompt,
                            args.passage_prompt)


def records_of(path: Path) -> list:
    """A `{id?, title, text}` JSONL corpus as it is; a file in another corpus or dataset format
    through `ragraph.eval.load_corpus` (when it fails too, the JSONL error is the one shown)."""
    from ragraph.eval import load_corpus
    from ragraph.eval.records import DatasetError
    from ragraph.runtime.retrieval.build.builder import CorpusError, CorpusRecord, read_corpus

    try:
        return list(read_corpus(path))
    except CorpusError as plain_error:
        if _looks_like_plain_corpus(path):
            raise
        try:
            return [CorpusRecord(None, p.title, p.text) for p in load_corpus(path)]
        except (DatasetError, ValueError, OSError):
            raise plain_error from None


def _looks_like_plain_corpus(path: Path) -> bool:
    import json

    with contextlib.suppress(OSError, UnicodeDecodeError, json.JSONDecodeError):
        with path.open(encoding="utf-8") as handle:
            first = next((line for line in handle if line.strip()), "")
        record = json.loads(first)
        return isinstance(record, dict) and bool({"title", "text"} & record.keys())
    return False


def _default(args: argparse.Namespace) -> int:
    from ragraph.runtime.retrieval.build.corpus import default_index_dir, ensure_default_index

    console = new_console(stderr=True)
    console.print(f"default index: {default_index_dir()}")
    with progress_bar(console, "embedding Wikipedia passages") as start:
        loaded = ensure_default_index(progress=start)
    m = loaded.manifest
    console.print(f"ok: {m.passages} passages, nlist {m.nlist}, {m.metric}, {m.embedder}")
    console.print("passages: English Wikipedia lead paragraphs (CC BY-SA 4.0)")
    return 0


def _shard(args: argparse.Namespace) -> int:
    from ragraph.runtime.retrieval.ivf.shard_lists import shard_dir, write_shards
    from ragraph.runtime.retrieval.manifest import Manifest

    Manifest.read(args.directory)  # a clear error for a directory that is not an index
    console = new_console(stderr=True)
    plan = write_shards(args.directory, args.shards, args.replicate)
    sizes = [len(plan.clusters_of(s)) for s in range(plan.shards)]
    console.print(f"wrote {shard_dir(args.directory, plan.shards)}: {plan.shards} shards of "
                  f"{min(sizes)}-{max(sizes)} lists, {plan.replicated().size} lists on two shards")
    return 0


def _info(args: argparse.Namespace) -> int:
    from ragraph.runtime.retrieval.manifest import load_index

    loaded = load_index(args.directory)
    m = loaded.manifest
    sizes = loaded.engine.cluster_sizes()
    out = new_console()
    out.print(f"directory   {loaded.directory}")
    out.print(f"passages    {m.passages}")
    out.print(f"index       {m.index_type}, nlist {m.nlist}, metric {m.metric}, dim {m.dim}")
    out.print(f"clusters    min {sizes.min()}, mean {sizes.mean():.1f}, max {sizes.max()} vectors")
    out.print(f"embedder    {m.embedder_spec.describe()}")
    out.print(f"source      {m.source or '-'}")
    out.print(f"checksum    {m.checksum[:16]}… (verified)")
    return 0
