"""Which text of a ragraph stream a LangChain stream passes on: chunks that add up to exactly
the answer `invoke` returns, as LangChain's stream contract wants. Which generations may be sent
as they come, and the whitespace, are `ragraph.runtime.answer_stream`'s (as serve streams)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragraph.api.events import Event, Finished, Token
from ragraph.runtime.answer_stream import AnswerDeltas
from ragraph.runtime.request import ANSWER


@dataclass
class AnswerText:
    """`live`: the generations whose tokens are the answer's (`answer_origins`); a workflow
    whose answer may be rewritten has none, and sends it whole at the end."""

    live: frozenset[str]
    deltas: AnswerDeltas = field(default_factory=AnswerDeltas)
    started: bool = False

    def chunk(self, event: Event) -> str | None:
        """What to send for `event` (None: nothing). `Finished` sends the rest, at least an
        empty chunk so that an empty answer's stream adds up to "" too; a failed request
        raises `RequestFailed` there."""
        text: str | None = None
        if isinstance(event, Token) and event.output == ANSWER and event.node in self.live:
            text = self.deltas.add(event.text) or None
        elif isinstance(event, Finished):
            rest = self.deltas.finish(event.answer.raise_for_error().answer or "")
            text = rest if rest or not self.started else None
        self.started = self.started or text is not None
        return text
