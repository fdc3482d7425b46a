"""`ragraph index build --docs`, `index add` and `index delete`: an index of one's own documents,
changed in place (ragraph.runtime.retrieval.build.ingest does the work; this file reads flags and
prints what happened)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ragraph.console import new_console


def add_chunk_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunk-tokens", type=int, metavar="N",
                        help="most tokens of the embedder's tokenizer in a passage (default 128, "
                             "less when the model's sequence is shorter)")
    parser.add_argument("--overlap", type=int, metavar="N",
                        help="most tokens neighbouring passages share, in whole sentences or "
                             "words (default chunk-tokens/4)")
    add_reading_flags(parser)


def add_reading_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skip-bad", action="store_true",
                        help="skip (and list) files that cannot be read instead of stopping")
    parser.add_argument("--follow-links", action="store_true",
                        help="read symbolic links that lead outside the folders given (they are "
                             "refused and listed otherwise)")
    parser.add_argument("--preprocess", metavar="CMD",
                        help="a shell command run on each document's text (standard input to "
                             "output; the file's path in RAGRAPH_DOCUMENT) before it is cut")


def register_changes(sub: argparse._SubParsersAction) -> None:
    add = sub.add_parser("add", help="add documents or corpus passages to an index in place")
    add.add_argument("directory", type=Path, help="an index directory")
    given = add.add_mutually_exclusive_group(required=True)
    given.add_argument("--docs", type=Path, nargs="+", metavar="PATH",
                       help="files and folders; a document already in the index is replaced")
    given.add_argument("--corpus", type=Path, help="a JSONL corpus, as `index build --corpus`")
    add.add_argument("--embedder-url", metavar="URL",
                     help="the embeddings server of an index built with --embedder-url")
    add_reading_flags(add)
    add.set_defaults(func=_add)

    delete = sub.add_parser("delete", help="delete documents or passages from an index in place")
    delete.add_argument("directory", type=Path, help="an index directory")
    which = delete.add_mutually_exclusive_group(required=True)
    which.add_argument("--source", type=Path, nargs="+", metavar="PATH",
                       help="documents by path (a folder: every document under it)")
    which.add_argument("--ids", type=int, nargs="+", metavar="ID", help="passages by id")
    delete.set_defaults(func=_delete)

    keywords = sub.add_parser("keywords", help="give an index built before hybrid search its "
                              "keyword index (indexes built now have one)")
    keywords.add_argument("directory", type=Path, help="an index directory")
    keywords.set_defaults(func=_keywords)


def build_docs(args: argparse.Namespace, config, console: Console) -> int:
    """`index build --docs`: read, cut, embed, build."""
    from ragraph.cli.cmd_index import progress_bar
    from ragraph.runtime.retrieval.build.chunking import ChunkConfig
    from ragraph.runtime.retrieval.build.ingest import build_index, passage_embedder

    chunk = ChunkConfig(args.chunk_tokens, args.overlap)
    embedder = passage_embedder(args.embedder, args.embedder_url, args.query_prompt,
                                args.passage_prompt)
    console.print(f"embedder {embedder.spec.describe()}")
    with progress_bar(console, "embedding") as start:
        report = build_index(args.docs, args.out, embedder=embedder, chunk=chunk, config=config,
                             skip_bad=args.skip_bad, follow_links=args.follow_links,
                             progress=start, preprocess=_hook(args))
    m = report.manifest
    console.print(f"built {args.out}: {report.documents} documents, {m.passages} passages of at "
                  f"most {m.chunk_tokens} tokens (overlap {m.chunk_overlap}), {m.index_type}, "
                  f"nlist {m.nlist}, {m.metric}, dim {m.dim}")
    _left_out(report, console)
    return 0


def _add(args: argparse.Namespace) -> int:
    from ragraph.cli.cmd_index import progress_bar, records_of
    from ragraph.runtime.retrieval.build.ingest import add_documents

    console = new_console(stderr=True)
    records = records_of(args.corpus) if args.corpus else ()
    with progress_bar(console, "embedding") as start:
        report = add_documents(args.directory, args.docs or (), records=records,
                               embedder_url=args.embedder_url, skip_bad=args.skip_bad,
                               follow_links=args.follow_links, progress=start,
                               preprocess=_hook(args))
    replaced = f", replaced {len(report.replaced)} documents" if report.replaced else ""
    console.print(f"added {report.added} passages{replaced} ({report.deleted} old passages "
                  f"deleted): {report.manifest.passages} passages, version "
                  f"{report.manifest.version}")
    _left_out(report, console)
    _balance(report, console)
    return 0


def _delete(args: argparse.Namespace) -> int:
    from ragraph.runtime.retrieval.build.ingest import delete_documents

    console = new_console(stderr=True)
    report = delete_documents(args.directory, sources=args.source or (), ids=args.ids or ())
    console.print(f"deleted {report.deleted} passages: {report.manifest.passages} passages, "
                  f"version {report.manifest.version}")
    _balance(report, console)
    return 0


def _hook(args: argparse.Namespace):
    from ragraph.runtime.retrieval.build.preprocess import command_hook

    return command_hook(args.preprocess) if args.preprocess else None


def _keywords(args: argparse.Namespace) -> int:
    from ragraph.runtime.retrieval.build.update import add_keywords

    console = new_console(stderr=True)
    committed = add_keywords(args.directory)
    if committed is None:
        console.print(f"{args.directory} has a keyword index already", highlight=False)
    else:
        console.print(f"added the keyword index: {committed.manifest.passages} passages, "
                      f"version {committed.manifest.version}", highlight=False)
    return 0


def _left_out(report, console: Console) -> None:
    from rich.markup import escape

    from ragraph.runtime.retrieval.build.documents import shown

    for skipped in report.skipped:
        console.print(f"[yellow]skipped[/yellow] {escape(shown(skipped.path))}: "
                      f"{escape(skipped.reason)}", markup=True, highlight=False)
    if report.other_kinds:
        names = ", ".join(shown(p) for p in report.other_kinds[:5])
        more = f" and {len(report.other_kinds) - 5} more" if len(report.other_kinds) > 5 else ""
        console.print(f"not documents (other kinds), left out: {names}{more}", highlight=False)


def _balance(report, console: Console) -> None:
    style = "yellow" if report.balance.retrain else "default"
    console.print(f"lists: {report.balance.describe()}", style=style, highlight=False)
