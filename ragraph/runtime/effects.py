"""What a Generate or Retrieve node does to a request's variables: the one definition every
executor uses, so the baselines and the wavefront scheduler cannot compute different answers."""

from __future__ import annotations

from ragraph.ir.nodes import Generate, Retrieve
from ragraph.ir.values import GeneratedText, Passages, Value


def generation_prompt(node: Generate, variables: dict[str, Value]) -> str:
    return node.prompt.render(variables)


def apply_generation(node: Generate, variables: dict[str, Value], text: str, min_prob: float) -> None:
    """Assign the generated text (stripped of surrounding whitespace), or append it as a line."""
    value = text.strip()
    if node.append and str(variables.get(node.output, "")).strip():
        value = f"{str(variables[node.output]).rstrip()}\n{value}"
    variables[node.output] = GeneratedText(value, min_prob)


def retrieval_query(node: Retrieve, variables: dict[str, Value]) -> str:
    return node.query.render(variables).strip()


def apply_retrieval(node: Retrieve, variables: dict[str, Value], passages: Passages) -> None:
    variables[node.output] = passages
