"""Which text of a ragraph stream a LangChain stream passes on: chunks whose concatenation is
exactly the answer `invoke` returns, as LangChain's stream contract wants (`stream` chunks
add up to the output)."""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from ragraph.api.events import Event, Finished, Token
from ragraph.errors import RagraphError
from ragraph.ir import RAGraph
from ragraph.runtime.request import ANSWER


def streams_live(graph: RAGraph) -> bool:
    """Whether the answer's tokens can be sent as they come: one generation assigns `answer`,
    once (outside any loop, not a map or a list). Otherwise a later round or node rewrites
    text already sent, so the answer is sent whole when the request finishes."""
    writers = [n for n in graph.nodes() if ANSWER in n.writes()]
    if len(writers) != 1 or getattr(writers[0], "each", None) or getattr(writers[0], "items",
                                                                           None):
        return False
    control, node = graph.control_graph(), writers[0].id
    return not any(nx.has_path(control, after, node) for after in control.successors(node))


@dataclass
class AnswerText:
    """The answer's chunks from a request's events. `Answer.answer` is the variable's text
    stripped, so leading whitespace is dropped and trailing whitespace held back until more
    text follows."""

    live: bool
    sent: str = ""
    held: str = ""

    def chunk(self, event: Event) -> str | None:
        """What to send for `event` (None: nothing). `Finished` sends the rest, at least an
        empty chunk, so that an empty answer's stream adds up to "" too; a failed request
        raises `RequestFailed` there."""
        if isinstance(event, Token):
            return self.token(event) or None
        if isinstance(event, Finished):
            first = not self.sent
            return self.rest(event.answer.raise_for_error().answer or "") or (
                "" if first else None)
        return None

    def token(self, event: Token) -> str:
        if not self.live or event.output != ANSWER:
            return ""
        text = self.held + event.text
        if not self.sent:
            text = text.lstrip()
        body = text.rstrip()
        self.held, self.sent = text[len(body):], self.sent + body
        return body

    def rest(self, answer: str) -> str:
        """What is left to send of the final `answer`."""
        if not answer.startswith(self.sent):
            # Engines hold back a possible stop string, so the tokens add up to the text:
            # a difference is a bug, never to be passed on as a wrong answer.
            raise RagraphError(f"the streamed text {self.sent!r} is not the start of the "
                               f"answer {answer!r}")
        rest, self.sent = answer[len(self.sent):], answer
        return rest
