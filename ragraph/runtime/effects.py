"""What a generation, retrieval or merge does to a request's variables: `ir.effects`, the one
definition every executor uses (re-exported here for the wavefront's modules), plus what only
the runtime computes about it: a chat turn's prompt, a prompt's prefix layout, and a request's
record of retrieved passages."""

from __future__ import annotations

from ragraph.ir.effects import (
    apply_branches_to,
    apply_generation_to,
    apply_merge,
    apply_retrieval_to,
    branches,
    generated_value,
    retrieval_query_of,
)
from ragraph.ir.fanout import merge
from ragraph.ir.stages import PromptLayout
from ragraph.ir.template import Template
from ragraph.ir.values import Items, Passages, Value, render_value
from ragraph.runtime.llm.chat import Prompt, chat_turn
from ragraph.runtime.llm.protocol import PromptSegments

__all__ = [
    "apply_branches_to", "apply_generation_to", "apply_merge", "apply_retrieval_to", "branches",
    "generated_value", "generation_prompt_of", "prompt_segments", "retrieval_query_of",
    "retrieved",
]


def generation_prompt_of(prompt: Template, variables: dict[str, Value],
                         system: Template | None = None, chat: bool = False) -> Prompt:
    """The completion text, or for a chat turn its messages (the engine applies the template)."""
    user = prompt.render(variables)
    if not chat:
        return user
    return chat_turn(user, None if system is None else system.render(variables))


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
