"""A script that drives every decision of workflows/ from the question text, and the questions
that use it: each names the behaviour it asks for, so a test knows which route to expect.

Words in a question:  lookup-no (no retrieval: Self-RAG "no", Adaptive-RAG "none"; no queries or
sub-questions: an empty list), several
(Adaptive-RAG "several"), muddled (a class the router does not know), irrelevant / unsupported
(Self-RAG critiques "no"), unsure (FLARE: every token at probability 0.1), hops-N (N follow-ups
or N reasoning sentences before the model says it is done; without it the model never is; N
queries or sub-questions, at most 3).
"""

from __future__ import annotations

import re

from tests.workflows.scripted import Reply

KINDS = ("plain", "lookup-no", "several", "muddled", "irrelevant", "unsupported", "unsure",
         "hops-1", "hops-2", "hops-9")


def questions(n: int) -> list[str]:
    return [f"Question {i} ({KINDS[i % len(KINDS)]}) about topic {i}?" for i in range(n)]


def hops(question: str) -> int:
    m = re.search(r"hops-(\d+)", question)
    return int(m.group(1)) if m else 99


def closed_book(question: str) -> str:
    return f"memory {question.split()[1]}"


def from_documents(question: str) -> str:
    return f"documents {question.split()[1]}"


def _listing_cue(prompt: str) -> str:
    """"Query" or "Sub-question" when the prompt awaits a list on the lines after its cue."""
    last = prompt.rstrip("\n").rsplit("\n", 1)[-1] if prompt.endswith("\n") else ""
    return {"Queries:": "Query", "Sub-questions:": "Sub-question"}.get(last, "")


def _after_question(prompt: str) -> str:
    return prompt.rsplit("\nQuestion: ", 1)[-1]


def script(question: str, cue: str, prompt: str) -> Reply:
    """The reply to the prompt of one workflow node (see the module docstring)."""
    prob = 0.1 if "unsure" in question else 0.9
    listing = _listing_cue(prompt)
    if listing:  # a list output, one item a line: as many as the question's hops (none: none)
        n = 0 if "lookup-no" in question else min(hops(question), 3)
        return Reply("".join(f"{listing} {i} of {question}\n" for i in range(1, n + 1)))
    if cue == "Needs a lookup":
        return Reply(" no" if "lookup-no" in question else " yes")
    if cue == "Lookups":
        return Reply(" none" if "lookup-no" in question else " several" if "several" in question
                     else " maybe" if "muddled" in question else " one")
    if cue == "Relevant":
        return Reply(" no" if "irrelevant" in question else " yes")
    if cue == "Supported":
        return Reply(" no" if "unsupported" in question else " yes")
    if cue == "Follow-up":
        done = _after_question(prompt).count("Fact number")
        return Reply(" none" if done >= hops(question) else f" What is part {done + 1}?")
    if cue == "Answer" and "\nReasoning:" in _after_question(prompt):
        return Reply(" " + from_documents(question))  # read off the chain
    if cue == "":  # the next sentence of a chain of thought
        done = _after_question(prompt).count("Step number")
        final = done + 1 >= hops(question)
        return Reply(f" So the answer is: {from_documents(question)}" if final
                     else f" Step number {done + 1} holds.")
    if cue in ("Passage", "Summary"):
        return Reply(f" A passage about topic {question.split()[1]}.")
    if "Document 1 (Title:" in prompt:
        if "full sentence" in prompt:
            return Reply(f" Fact number {question.split()[1]} is known.")
        return Reply(" " + from_documents(question), prob)
    if "Summary: A passage" in prompt:
        return Reply(" " + from_documents(question), prob)
    return Reply(" " + closed_book(question), prob)
