"""prefix-layout: RAGCache document-prefix reuse. For each prefill whose prompt contains retrieved
documents, record the layout [static][documents][rest] on the node (`PromptLayout`) so the runtime
and a prefix-caching engine can reuse document KV across requests, and remark when a per-request
value precedes the documents (e.g. the question first), saying how to fix it.

A chat turn is laid out on its flat text [system][user] (`ir.chat`): a system message without
per-request values is part of the static prefix, and documents may sit in either message.

By default the rendered prompt text never changes (optimizations never change answers).
`rewrite=true` moves the documents block (with the label lines just above it) before the first
line that holds a per-request value: this CHANGES the prompt text and can change answers, so it is
opt-in.

The pass is not part of -O2 (runs by name): a prefix cache (SGLang's radix tree, vLLM's block
hashes, the simulated engine, llama.cpp's prefix store) reuses the prompt tokens it shares with an
earlier prompt whether or not a layout is recorded, so recording one gained nothing measured;
what the runtime reads from it is the prefill grouping of `scheduler.policies.order_prefills`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from ragraph.ir.chat import flat_prompt
from ragraph.ir.graph import RAGraph
from ragraph.ir.stages import Prefill, PromptLayout
from ragraph.ir.template import Hole, Template
from ragraph.passes.analysis import passage_vars, steps
from ragraph.passes.base import Pass, PassContext


def layout_of(prompt: Template, passages: frozenset[str]) -> PromptLayout:
    segments = prompt.segments()
    first = next((i for i, s in enumerate(segments) if isinstance(s, Hole)), len(segments))
    static = "".join(s for s in segments[:first] if isinstance(s, str))
    docs = tuple(dict.fromkeys(h.name for h in prompt.holes if h.name in passages))
    reusable = first < len(segments) and segments[first].name in passages  # type: ignore[union-attr]
    return PromptLayout(docs=docs, static=static, reusable=reusable)


def docs_first(prompt: Template, passages: frozenset[str]) -> Template | None:
    """The prompt with the first documents line (and the hole-free label lines right above it)
    moved before the first line with a hole; None when that cannot be done line by line."""
    lines = prompt.text.split("\n")
    holes = [Template.parse(line).variables for line in lines]
    k = next(i for i, vs in enumerate(holes) if vs)
    d = next(i for i, vs in enumerate(holes) if vs & passages)
    if d == k:
        return None
    s = d
    while s - 1 > k and not holes[s - 1]:
        s -= 1
    moved = lines[:k] + lines[s:d + 1] + lines[k:s] + lines[d + 1:]
    return Template.parse("\n".join(moved))


@dataclass(frozen=True)
class PrefixLayout(Pass):
    name: ClassVar[str] = "prefix-layout"
    summary: ClassVar[str] = "record [instructions][documents][question] layouts (RAGCache)"
    requires: ClassVar[tuple[str, ...]] = ("split-stages",)
    rewrite: bool = False  # reorder prompts to put documents first: CHANGES prompts, not in -O2

    def apply(self, graph: RAGraph, ctx: PassContext) -> bool:
        passages = passage_vars(graph)
        changed = False
        for node in steps(graph, "prefill"):
            assert isinstance(node, Prefill)  # invariant of steps(kind)
            if not node.flat_prompt.variables & passages:
                continue
            prompt = self._prompt(node, passages, ctx)
            layout = layout_of(flat_prompt(prompt, node.system), passages)
            wanted = replace(node, prompt=prompt, layout=layout)
            if wanted != node:
                graph.replace_node(wanted)
                changed = True
        return changed

    def _prompt(self, node: Prefill, passages: frozenset[str], ctx: PassContext) -> Template:
        """The (user) prompt to keep, with a remark when its documents cannot be reused."""
        flat = node.flat_prompt
        if layout_of(flat, passages).reusable:
            return node.prompt
        first = next(h.name for h in flat.holes)
        docs = next(h.name for h in flat.holes if h.name in passages)
        if node.system is not None and node.system.holes:
            ctx.remark(node.origin, f"the system message holds {{{first}}}, which comes before "
                       f"the documents {{{docs}}}, so their KV cache cannot be reused across "
                       "requests; keep per-request values out of the system message")
            return node.prompt
        if not self.rewrite:
            ctx.remark(node.origin, f"{{{first}}} comes before the documents {{{docs}}} in the "
                       "prompt, so their KV cache cannot be reused across requests; put "
                       f"{{{docs}}} before {{{first}}} (after the fixed instructions), or compile "
                       "with prefix-layout{rewrite=true}, which changes the prompt")
            return node.prompt
        moved = docs_first(node.prompt, passages)
        if moved is None:
            ctx.remark(node.origin, f"cannot move {{{docs}}} before {{{first}}}: they share a "
                       "line; edit the prompt to put the documents first")
            return node.prompt
        ctx.remark(node.origin, "prompt rewritten to [instructions][documents][question] "
                   "(rewrite=true: the prompt text changed, answers may change)")
        return moved
