"""Values a request's variables hold: text, numbers, booleans, and retrieved passages.

Retrieved passages are always rendered into prompts by `format_passages`, so the same documents give
byte-identical prompt text in every request (prefix-caching engines reuse their KV).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Origin:
    """Where a passage was cut from: the document's path and the passage's character span
    `[start, end)` in the document's text (the file itself for text and Markdown, the extracted
    text for HTML and PDF), and for Markdown the heading path of its section, outermost first."""

    source: str
    start: int
    end: int
    headings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"source": self.source, "start": self.start, "end": self.end}
        if self.headings:
            out["headings"] = list(self.headings)
        return out


@dataclass(frozen=True)
class Passage:
    """One retrieved passage. `id` is the passage store's id; `score` the search distance;
    `origin` where it came from (None for passages of a JSONL corpus)."""

    id: int
    title: str
    text: str
    score: float = field(default=0.0, compare=False)
    synthetic: bool = False
    origin: Origin | None = field(default=None, compare=False)

    def to_json(self, text: bool = True) -> dict[str, object]:
        """`{id, title, text?, source?, start?, end?}`: what run's output and serve show."""
        out: dict[str, object] = {"id": self.id, "title": self.title}
        if text:
            out["text"] = self.text
        if self.origin is not None:
            out.update(self.origin.to_json())
        return out


@dataclass(frozen=True)
class Passages:
    """The ordered top-k of one retrieval."""

    items: tuple[Passage, ...] = ()

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __str__(self) -> str:
        return format_passages(self)

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(p.id for p in self.items)


class GeneratedText(str):
    """Text produced by a generation, carrying the probability of its least likely token.

    It is a `str` everywhere (templates, comparisons); `confidence(x)` in a condition reads
    `min_prob` (1.0 when the engine gave no logprobs).
    """

    min_prob: float

    def __new__(cls, text: str, min_prob: float = 1.0) -> GeneratedText:
        obj = super().__new__(cls, text)
        obj.min_prob = min_prob
        return obj


@dataclass(frozen=True)
class Items:
    """A list value: the items of a list output (`-> queries[4]`), or one result per branch of a
    map. Steps read it only by mapping over it or merging it (never rendered whole)."""

    values: tuple[Value, ...] = ()

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return iter(self.values)

    def __getitem__(self, i: int) -> Value:
        return self.values[i]


Value = str | int | float | bool | Passages | Items


def format_passage(index: int, passage: Passage) -> str:
    return f"Document {index} (Title: {passage.title}) {passage.text}"


def format_passages(passages: Passages) -> str:
    """The one rendering of a passage list inside prompts (FlashRAG's reference format)."""
    return "\n".join(format_passage(i, p) for i, p in enumerate(passages.items, start=1))


def render_value(value: Value) -> str:
    if isinstance(value, Passages):
        return format_passages(value)
    if isinstance(value, Items):  # the verifier keeps lists out of templates; a line each
        return "\n".join(render_value(v) for v in value.values)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
