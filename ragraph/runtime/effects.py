"""What a Generate, Retrieve or Merge node does to a request's variables: the one definition every
executor uses, so the baselines and the wavefront scheduler cannot compute different answers.
The `_of`/`_to` forms take the template or output of a compiled chain; the node forms are the
same functions applied to an original node. A map's branches render from `branches` and their
results land as one list (`apply_branches_to`), in branch order whatever order they finished in."""

from __future__ import annotations

from collections.abc import Sequence

from ragraph.ir.fanout import Binding, branch_states, merge, split_items
from ragraph.ir.nodes import Generate, Merge, Retrieve
from ragraph.ir.stages import PromptLayout
from ragraph.ir.template import Template
from ragraph.ir.values import GeneratedText, Items, Passages, Value, render_value
from ragraph.runtime.llm.chat import Prompt, chat_turn
from ragraph.runtime.llm.protocol import PromptSegments


def generation_prompt_of(prompt: Template, variables: dict[str, Value],
                         system: Template | None = None, chat: bool = False) -> Prompt:
    """The completion text, or for a chat turn its messages (the engine applies the template)."""
    user = prompt.render(variables)
    if not chat:
        return user
    return chat_turn(user, None if system is None else system.render(variables))


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


def retrieved(value: Value) -> list[Passages]:
    """What a retrieval or merge adds to a request's record of retrieved passages (its last entry
    is the outcome's `passages`): a map's every passage, each once, in branch order."""
    if isinstance(value, Passages):
        return [value]
    return [merge("dedup", value)] if isinstance(value, Items) else []  # type: ignore[list-item]


def prompt_segments(prompt: Template, layout: PromptLayout, variables: dict[str, Value]
                    ) -> PromptSegments | None:
    """Where the static prefix and the documents of a rendered prompt end (prefix-layout);
    None when the prompt carries no documents. `prompt` is the flat one of a chat turn
    (`ir.chat`), whose rendering is the turn's `chat.prompt_text`."""
    if not layout.docs:
        return None
    offset, docs_end = 0, 0
    for seg in prompt.segments():
        offset += len(seg) if isinstance(seg, str) else len(render_value(variables[seg.name]))
        if not isinstance(seg, str) and seg.name in layout.docs:
            docs_end = offset
    return PromptSegments(min(len(layout.static), docs_end), docs_end)


def retrieval_query_of(query: Template, variables: dict[str, Value]) -> str:
    return query.render(variables).strip()


def generation_prompt(node: Generate, variables: dict[str, Value]) -> Prompt:
    return generation_prompt_of(node.prompt, variables, node.system, node.chat)


def apply_generation(node: Generate, variables: dict[str, Value], text: str, min_prob: float) -> None:
    apply_generation_to(node.output, node.append, variables, text, min_prob, node.items)


def retrieval_query(node: Retrieve, variables: dict[str, Value]) -> str:
    return retrieval_query_of(node.query, variables)


def apply_retrieval_to(output: str, variables: dict[str, Value], passages: Passages) -> None:
    variables[output] = passages


def apply_retrieval(node: Retrieve, variables: dict[str, Value], passages: Passages) -> None:
    apply_retrieval_to(node.output, variables, passages)
