"""What a Generate or Retrieve node does to a request's variables: the one definition every
executor uses, so the baselines and the wavefront scheduler cannot compute different answers.
The `_of`/`_to` forms take the template or output of a compiled chain; the node forms are the
same functions applied to an original node."""

from __future__ import annotations

from ragraph.ir.nodes import Generate, Retrieve
from ragraph.ir.stages import PromptLayout
from ragraph.ir.template import Template
from ragraph.ir.values import GeneratedText, Passages, Value, render_value
from ragraph.runtime.llm.protocol import PromptSegments


def generation_prompt_of(prompt: Template, variables: dict[str, Value]) -> str:
    return prompt.render(variables)


def apply_generation_to(output: str, append: bool, variables: dict[str, Value], text: str,
                        min_prob: float) -> None:
    """Assign the generated text (stripped of surrounding whitespace), or append it as a line."""
    value = text.strip()
    if append and str(variables.get(output, "")).strip():
        value = f"{str(variables[output]).rstrip()}\n{value}"
    variables[output] = GeneratedText(value, min_prob)


def prompt_segments(prompt: Template, layout: PromptLayout, variables: dict[str, Value]
                    ) -> PromptSegments | None:
    """Where the static prefix and the documents of a rendered prompt end (prefix-layout);
    None when the prompt carries no documents."""
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


def generation_prompt(node: Generate, variables: dict[str, Value]) -> str:
    return generation_prompt_of(node.prompt, variables)


def apply_generation(node: Generate, variables: dict[str, Value], text: str, min_prob: float) -> None:
    apply_generation_to(node.output, node.append, variables, text, min_prob)


def retrieval_query(node: Retrieve, variables: dict[str, Value]) -> str:
    return retrieval_query_of(node.query, variables)


def apply_retrieval_to(output: str, variables: dict[str, Value], passages: Passages) -> None:
    variables[output] = passages


def apply_retrieval(node: Retrieve, variables: dict[str, Value], passages: Passages) -> None:
    apply_retrieval_to(node.output, variables, passages)
