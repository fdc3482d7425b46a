"""What a generation, retrieval or merge does to a request's variables, whichever executor
runs it (and whether the compiler split it into sub-stages or not): the functions take the
parts of a chain (its output, append, items), so an unsplit node and a split chain assign alike.
A map's branches render from `branches` and their results land as one list
(`apply_branches_to`), in branch order whatever order they finished in."""

from __future__ import annotations

from collections.abc import Sequence

from ragraph.ir.fanout import Binding, branch_states, merge, split_items
from ragraph.ir.nodes import Merge
from ragraph.ir.template import Template
from ragraph.ir.values import GeneratedText, Items, Passages, Value


def apply_generation_to(output: str, append: bool, variables: dict[str, Value], text: str,
                        min_prob: float, items: int | None = None) -> None:
    """Assign the generated text (stripped of surrounding whitespace), append it as a line, or
    split it into a list of at most `items` items."""
    if items:
        variables[output] = split_items(text, items, min_prob)
        return
    value = text.strip()
    if append and str(variables.get(output, "")).strip():
        value = f"{str(variables[output]).rstrip()}\n{value}"
    variables[output] = GeneratedText(value, min_prob)


def branches(each: tuple[Binding, ...], variables: dict[str, Value],
             node: str) -> list[dict[str, Value]]:
    """A map's variables, one map per branch (the item names bound); empty for an empty list."""
    return branch_states(each, variables, node)


def generated_value(text: GeneratedText) -> GeneratedText:
    """One branch's generation as its list item (stripped, as a plain output would be)."""
    return GeneratedText(text.strip(), text.min_prob)


def apply_branches_to(output: str, variables: dict[str, Value], values: Sequence[Value]) -> None:
    """Assign a map's results, in branch order."""
    variables[output] = Items(tuple(values))


def apply_merge(node: Merge, variables: dict[str, Value]) -> None:
    variables[node.output] = merge(node.method, variables[node.input], node.k, node.topk)


def retrieval_query_of(query: Template, variables: dict[str, Value]) -> str:
    return query.render(variables).strip()


def apply_retrieval_to(output: str, variables: dict[str, Value], passages: Passages) -> None:
    variables[output] = passages
