"""QA datasets as typed examples: NQ oracle, NQ-open, HotpotQA, MuSiQue and FlashRAG JSONL.

Every loader yields the same `QAExample`; `load_dataset` picks the loader from the first record's
fields, so a renamed file still loads. Examples without an id in their file get `<format>-<index>`
(0-based position in the file), which is what `ragraph run` copies to its output lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from types import MappingProxyType

from ragraph.eval.records import DatasetError, Record, iter_records

__all__ = [
    "FORMATS",
    "DatasetError",
    "GoldPassage",
    "QAExample",
    "detect_format",
    "iter_dataset",
    "load_dataset",
]


@dataclass(frozen=True)
class GoldPassage:
    """A passage that supports the answer, as annotated by the dataset."""

    title: str
    text: str


@dataclass(frozen=True)
class QAExample:
    id: str
    question: str
    golden_answers: tuple[str, ...]
    gold_passages: tuple[GoldPassage, ...] = ()
    # Dataset-specific extras (HotpotQA type/level, MuSiQue decomposition); not compared.
    metadata: Mapping[str, object] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, hash=False
    )


def _nq_oracle(rec: Record, index: int) -> QAExample:
    ctxs = rec.get("ctxs", list)
    gold = []
    for pos, ctx in enumerate(ctxs):  # type: ignore[union-attr]
        sub = Record(rec.path, rec.line, ctx)
        try:
            passage = GoldPassage(sub.text("title"), sub.text("text"))
            is_gold = sub.get("isgold", bool, False)
        except DatasetError as err:
            raise rec.error(f"field 'ctxs[{pos}]': {err.message}") from err
        if is_gold:
            gold.append(passage)
    return QAExample(
        id=rec.text("id", f"nq-oracle-{index}"),
        question=rec.text("question"),
        golden_answers=rec.strings("answers"),
        gold_passages=tuple(gold),
    )


def _nq_open(rec: Record, index: int) -> QAExample:
    name = "answer" if "answer" in rec.fields() else "answers"
    return QAExample(
        id=rec.text("id", f"nq-open-{index}"),
        question=rec.text("question"),
        golden_answers=rec.strings(name),
    )


def _flashrag(rec: Record, index: int) -> QAExample:
    metadata = rec.get("metadata", dict, {})
    return QAExample(
        id=str(rec.get("id", (str, int), f"flashrag-{index}")),
        question=rec.text("question"),
        golden_answers=rec.strings("golden_answers"),
        metadata=MappingProxyType(dict(metadata)),  # type: ignore[arg-type]
    )


def _hotpotqa(rec: Record, index: int) -> QAExample:
    context = _hotpot_context(rec)
    facts = rec.get("supporting_facts", list)
    titles: list[str] = []
    for pos, fact in enumerate(facts):  # type: ignore[union-attr]
        if not (isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], str)):
            raise rec.error(f"field 'supporting_facts[{pos}]': expected [title, sentence index]")
        if fact[0] not in context:
            raise rec.error(
                f"field 'supporting_facts[{pos}]': title {fact[0]!r} is not in 'context'"
            )
        if fact[0] not in titles:
            titles.append(fact[0])
    return QAExample(
        id=rec.text("_id", f"hotpotqa-{index}"),
        question=rec.text("question"),
        golden_answers=(rec.text("answer"),),
        # HotpotQA sentences keep their leading spaces, so joining them restores the paragraph.
        gold_passages=tuple(GoldPassage(t, "".join(context[t])) for t in titles),
        metadata=MappingProxyType(
            {
                "type": rec.text("type", ""),
                "level": rec.text("level", ""),
                "supporting_facts": facts,
            }
        ),
    )


def _hotpot_context(rec: Record) -> dict[str, list[str]]:
    context: dict[str, list[str]] = {}
    for pos, entry in enumerate(rec.get("context", list)):  # type: ignore[arg-type]
        ok = isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
        if not (ok and isinstance(entry[1], list) and all(isinstance(s, str) for s in entry[1])):
            raise rec.error(f"field 'context[{pos}]': expected [title, [sentences]]")
        context[entry[0]] = entry[1]
    return context


def _musique(rec: Record, index: int) -> QAExample:
    gold = []
    for pos, para in enumerate(rec.get("paragraphs", list)):  # type: ignore[arg-type]
        sub = Record(rec.path, rec.line, para)
        try:
            passage = GoldPassage(sub.text("title"), sub.text("paragraph_text"))
            supporting = sub.get("is_supporting", bool, False)
        except DatasetError as err:
            raise rec.error(f"field 'paragraphs[{pos}]': {err.message}") from err
        if supporting:
            gold.append(passage)
    answers = (rec.text("answer"), *rec.strings("answer_aliases", []))
    return QAExample(
        id=rec.text("id", f"musique-{index}"),
        question=rec.text("question"),
        golden_answers=tuple(dict.fromkeys(answers)),  # aliases may repeat the answer
        gold_passages=tuple(gold),
        metadata=MappingProxyType(
            {
                "answerable": rec.get("answerable", bool, True),
                "question_decomposition": rec.get("question_decomposition", list, []),
            }
        ),
    )


FORMATS: Mapping[str, Callable[[Record, int], QAExample]] = MappingProxyType(
    {
        "nq-oracle": _nq_oracle,
        "nq-open": _nq_open,
        "hotpotqa": _hotpotqa,
        "musique": _musique,
        "flashrag": _flashrag,
    }
)


def detect_format(record: Record) -> str:
    """The dataset format of a file, judged from its first record's fields."""
    if record.key is not None:
        raise record.error("this is a corpus (title -> text), not a QA dataset; use load_corpus")
    fields = record.fields()
    if "golden_answers" in fields:
        return "flashrag"
    if "ctxs" in fields:
        return "nq-oracle"
    if "supporting_facts" in fields:
        return "hotpotqa"
    if "paragraphs" in fields:
        return "musique"
    if "question" in fields and ("answer" in fields or "answers" in fields):
        return "nq-open"
    if "title" in fields and "text" in fields:
        raise record.error("this is a corpus of {title, text} passages; use load_corpus")
    raise record.error(
        "unknown dataset format: expected 'question' with 'golden_answers' (FlashRAG), 'answers' + "
        "'ctxs' (NQ oracle), 'answer' (NQ-open), 'supporting_facts' (HotpotQA) or 'paragraphs' (MuSiQue)"
    )


def iter_dataset(path: str | Path, fmt: str | None = None) -> Iterator[QAExample]:
    """Examples of a dataset file, lazily; `fmt` (a key of FORMATS) skips detection."""
    if fmt is not None and fmt not in FORMATS:
        raise DatasetError(str(path), f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    parse = FORMATS[fmt] if fmt is not None else None
    for index, record in enumerate(iter_records(Path(path))):
        if parse is None:
            parse = FORMATS[detect_format(record)]
        yield parse(record, index)


def load_dataset(
    path: str | Path, limit: int | None = None, fmt: str | None = None
) -> list[QAExample]:
    """The first `limit` examples (all when None) of a dataset file; ids must be unique."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit: must be >= 0, got {limit}")
    examples = list(islice(iter_dataset(path, fmt), limit))
    seen: set[str] = set()
    for ex in examples:
        if ex.id in seen:
            raise DatasetError(str(path), f"duplicate example id {ex.id!r}")
        seen.add(ex.id)
    return examples
