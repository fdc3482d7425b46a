"""Fan-out: list values, steps that map over them, and the merges that combine their branches.

A generation with a list output (`-> queries[4]`) splits its text into at most that many items.
A mapped step (`retrieve search[q in queries]`) runs once per item, the item bound to `q` inside
its query or prompt, and writes a list: one result per branch, in item order. Several bindings
zip lists of the same length. A merge turns a list back into one value. Everything here is a pure
function of values, so the reference interpreter and every executor compute the same thing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ragraph.errors import WorkflowError
from ragraph.ir.template import Template
from ragraph.ir.values import GeneratedText, Items, Passage, Passages, Value

# Cormack, Clarke and Buettcher, 2009, "Reciprocal Rank Fusion outperforms Condorcet and
# individual Rank Learning Methods" (SIGIR): k = 60, the constant RAG-Fusion keeps.
RRF_K = 60
MERGES = ("concat", "dedup", "rrf")
# A list marker a model may put before an item ("1. ", "2) ", "- ", "* "); not part of the item.
_MARKER = re.compile(r"^\s*(?:[0-9]{1,2}[.)]|[-*\u2022])\s+")


@dataclass(frozen=True)
class Binding:
    """`item in over`: inside a mapped step, `item` names one item of the list `over`."""

    item: str
    over: str

    def __str__(self) -> str:
        return f"{self.item} in {self.over}"


def bindings(each: Mapping[str, str] | tuple[Binding, ...] | None) -> tuple[Binding, ...]:
    """The builder's `each={"q": "queries"}` (or prepared bindings) as a tuple of Bindings."""
    if each is None:
        return ()
    if isinstance(each, tuple) and all(isinstance(b, Binding) for b in each):
        return each
    if not isinstance(each, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in each.items()):
        raise WorkflowError(f"each maps item names to list variables, like {{'q': 'queries'}}; "
                            f"got {each!r}")
    return tuple(Binding(item, over) for item, over in each.items())


def template_reads(template: Template, each: tuple[Binding, ...]) -> frozenset[str]:
    """Request variables a (mapped) template reads: its holes, less the item names, plus the
    lists mapped over."""
    items = {b.item for b in each}
    return (template.variables - items) | {b.over for b in each}


def branch_states(each: tuple[Binding, ...], state: Mapping[str, Value],
                  node: str) -> list[dict[str, Value]]:
    """One variable map per branch: the request's variables plus that branch's items."""
    lists = [(b, state[b.over]) for b in each]
    for b, value in lists:
        if not isinstance(value, Items):
            raise WorkflowError(f"map {node!r}: {b.over!r} is not a list", node=node)
    sizes = {len(value) for _, value in lists}  # type: ignore[arg-type]
    if len(sizes) > 1:
        shown = ", ".join(f"{b.over!r} has {len(v)}" for b, v in lists)  # type: ignore[arg-type]
        raise WorkflowError(f"map {node!r} zips lists of different lengths: {shown}", node=node)
    n = sizes.pop() if sizes else 0
    return [{**state, **{b.item: v[i] for b, v in lists}} for i in range(n)]  # type: ignore[index]


def split_items(text: str, bound: int, min_prob: float = 1.0) -> Items:
    """A list output: the non-empty lines of the text, list markers removed, at most `bound`."""
    lines = (_MARKER.sub("", line).strip() for line in text.splitlines())
    return Items(tuple(GeneratedText(line, min_prob) for line in lines if line)[:bound])


def merge(method: str, value: Value, k: int = RRF_K, topk: int | None = None) -> Value:
    """Combine a list into one value. `rrf`: reciprocal-rank fusion of passage rankings;
    `dedup`: the passages in order, each passage id once; `concat`: the passages in order, or
    text items joined by lines."""
    items = value.values if isinstance(value, Items) else ()
    if method == "concat" and not any(isinstance(v, Passages) for v in items):
        return "\n".join(str(v).strip() for v in items)
    runs = [v for v in items if isinstance(v, Passages)]
    if method == "rrf":
        merged = rrf(runs, k)
    elif method == "dedup":
        merged = _unique(p for run in runs for p in run)
    else:
        merged = tuple(p for run in runs for p in run)
    return Passages(merged if topk is None else merged[:topk])


def rrf(runs: list[Passages], k: int = RRF_K) -> tuple[Passage, ...]:
    """score(d) = sum over rankings of 1 / (k + rank of d), ranks from 1; ties keep the order of
    first appearance (ranking by ranking), so fusion is deterministic."""
    scores: dict[int, float] = {}
    first: dict[int, Passage] = {}
    for run in runs:
        for rank, passage in enumerate(run, start=1):
            scores[passage.id] = scores.get(passage.id, 0.0) + 1.0 / (k + rank)
            first.setdefault(passage.id, passage)
    order = sorted(enumerate(first), key=lambda pair: (-scores[pair[1]], pair[0]))
    return tuple(first[pid] for _, pid in order)


def _unique(passages) -> tuple[Passage, ...]:  # noqa: ANN001 - an iterable of Passage
    seen: dict[int, Passage] = {}
    for p in passages:
        seen.setdefault(p.id, p)
    return tuple(seen.values())
