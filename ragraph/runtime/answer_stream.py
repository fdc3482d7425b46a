"""The final answer as a stream of deltas (serve's OpenAI `stream: true`, LangChain streams).

A request's answer is the `answer` variable, stripped, when the workflow ends. Its text can be sent
while the engine writes it only from a generation that is certainly the last word: it assigns
`answer` (not appending) and every control edge out of it goes to END. Any other generation of
`answer` (a loop's round, FLARE's look-ahead) may be overwritten, so such a workflow's answer is
sent in one piece when the request finishes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, Generate
from ragraph.runtime.request import ANSWER


def answer_origins(source: RAGraph) -> frozenset[str]:
    """The generations of `source` (the workflow as written) whose text is the final answer."""
    out = set()
    for node in source.nodes():
        if isinstance(node, Generate) and node.output == ANSWER and not node.append:
            edges = source.out_edges(node.id, control_only=True)
            if edges and all(e.dst == END for e in edges):
                out.add(node.id)
    return frozenset(out)


@dataclass
class AnswerDeltas:
    """Text in, deltas out, adding up to the stripped answer: leading whitespace is dropped and
    trailing whitespace held back until more text follows it."""

    sent: str = ""
    held: str = ""

    def add(self, text: str) -> str:
        if not self.sent:
            text = (self.held + text).lstrip()
            self.held = ""
        body = (self.held + text).rstrip()
        self.held = (self.held + text)[len(body):]
        self.sent += body
        return body

    def finish(self, answer: str) -> str:
        """The rest of `answer`: all of it when nothing was sent. Sent text is never taken back,
        so a stream that diverged from the answer (it cannot, by `answer_origins`) ends as is."""
        if not answer.startswith(self.sent):
            return ""
        rest, self.sent, self.held = answer[len(self.sent):], answer, ""
        return rest
