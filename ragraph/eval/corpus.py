"""Passage corpora as `{title, text}` passages, for building benchmark indexes.

Three layouts are read: a JSON object title -> sentences or text (HotpotQA's corpus), a list of
`{title, text}` records (MuSiQue, 2WikiMultihopQA), and any QA dataset `load_dataset` reads, whose
gold passages form the corpus (the NQ oracle's 2,600 Wikipedia passages). Duplicates are dropped,
keeping the first occurrence, so a passage is indexed once however many questions cite it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path

from ragraph.eval.datasets import FORMATS, detect_format
from ragraph.eval.records import DatasetError, Record, iter_records

__all__ = ["CorpusPassage", "DatasetError", "iter_corpus", "load_corpus"]


@dataclass(frozen=True)
class CorpusPassage:
    title: str
    text: str


def _from_entry(record: Record) -> CorpusPassage:
    """A title -> text entry; a list of sentences is joined as HotpotQA wrote them (leading spaces)."""
    value = record.value
    if isinstance(value, str):
        return CorpusPassage(record.key or "", value)
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return CorpusPassage(record.key or "", "".join(value))
    raise record.error(f"entry {record.key!r}: expected a text or a list of sentences")


def _from_record(record: Record) -> CorpusPassage:
    # FlashRAG corpora keep both in one `contents` field: '"Title"\ntext'.
    fields = record.fields()
    if "contents" in fields and "text" not in fields:
        title, _, text = record.text("contents").partition("\n")
        return CorpusPassage(title.strip('"'), text)
    return CorpusPassage(record.text("title"), record.text("text"))


def _is_passage_record(record: Record) -> bool:
    if record.key is not None or not isinstance(record.value, dict):
        return False
    return "question" not in record.value


def _passages(records: Iterator[Record]) -> Iterator[CorpusPassage]:
    first = next(records, None)
    if first is None:
        return
    if first.key is not None:
        yield _from_entry(first)
        yield from (_from_entry(r) for r in records)
    elif _is_passage_record(first):
        yield _from_record(first)
        yield from (_from_record(r) for r in records)
    else:
        parse = FORMATS[detect_format(first)]
        for index, record in enumerate(chain([first], records)):
            for gold in parse(record, index).gold_passages:
                yield CorpusPassage(gold.title, gold.text)


def iter_corpus(path: str | Path) -> Iterator[CorpusPassage]:
    """Unique passages of a corpus or QA dataset file, in file order, lazily."""
    seen: set[CorpusPassage] = set()
    for passage in _passages(iter_records(Path(path))):
        if passage not in seen:
            seen.add(passage)
            yield passage


def load_corpus(path: str | Path, limit: int | None = None) -> list[CorpusPassage]:
    """The first `limit` unique passages (all when None) of a corpus or QA dataset file."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit: must be >= 0, got {limit}")
    passages = list(islice(iter_corpus(path), limit))
    if not passages and limit != 0:
        raise DatasetError(str(path), "no passages in this file")
    return passages
