"""A retrieval's filter as the IR holds it: `(field, value)` conditions, sorted by field, read
from the `FIELD=VALUE` items that `ragraph run --filter` and a `.rag` retrieve's `filter` option
both take. `source` is a glob over the document's path; any other field must equal its value.
The runtime reads the conditions as a `Where` (runtime/retrieval/options.py), which checks the
fields against the index's passage store when a request searches it."""

from __future__ import annotations

from collections.abc import Iterable

Condition = tuple[str, str | int]


def parse_filter(items: Iterable[str]) -> tuple[Condition, ...]:
    """`["source=guides/*.md", "doc_id=3"]` as conditions: a value of digits is an integer,
    but a source's, which is a glob; of two items for one field, the later holds (as repeated
    flags do). ValueError: an item that is not FIELD=VALUE."""
    found: dict[str, str | int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"must be FIELD=VALUE (source=GLOB for the document path), "
                             f"got {item!r}")
        found[name] = int(value) if value.isdigit() and name != "source" else value
    return tuple(sorted(found.items()))


def filter_items(conditions: tuple[Condition, ...]) -> list[str]:
    """The conditions written back as `FIELD=VALUE` items."""
    return [f"{name}={value}" for name, value in conditions]


def check_conditions(conditions: object) -> str | None:
    """What is wrong with `conditions` as a node's filter, or None."""
    if not isinstance(conditions, tuple):
        return f"filter must be a tuple of (field, value) pairs, got {conditions!r}"
    for pair in conditions:
        if (not isinstance(pair, tuple) or len(pair) != 2 or not isinstance(pair[0], str)
                or not pair[0] or not isinstance(pair[1], str | int) or isinstance(pair[1], bool)):
            return f"filter condition {pair!r} is not a (field, string or integer) pair"
        if pair[0] == "source" and not isinstance(pair[1], str):
            return f"filter source must be a glob string, got {pair[1]!r}"
    if [name for name, _ in conditions] != sorted({name for name, _ in conditions}):
        return "filter conditions must be sorted by field, each field once"
    return None
