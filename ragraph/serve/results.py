"""A finished request as JSON: the run API's `end` event and `/runs/wait` body, event payloads,
and the error a failed request answers with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragraph.ir.values import Passages, Value
from ragraph.runtime.outcome import Outcome
from ragraph.serve.bodies import HttpError
from ragraph.serve.hub import Ticket


def failure(outcome: Outcome) -> HttpError:
    """The workflow failed on a well-formed request (an engine error, say): the server's fault
    as far as the client can tell, and the message says what happened."""
    return HttpError(500, f"the workflow failed: {outcome.error}")


def values_json(values: Mapping[str, Value]) -> dict[str, Any]:
    """Variables as JSON: text as text, retrieved passages as their ids and titles."""
    return {name: _value(v) for name, v in values.items()}


def passages_json(passages: Passages | None) -> list[dict[str, Any]]:
    return [{"id": p.id, "title": p.title} for p in passages or ()]


def _value(value: Value) -> Any:
    if isinstance(value, Passages):
        return passages_json(value)
    if isinstance(value, str):
        return str(value)
    return value


def finished_json(ticket: Ticket, outcome: Outcome) -> dict[str, Any]:
    """The answer, the path through the workflow, the last passages, usage and timings (seconds
    from the request's arrival at the server)."""
    first = outcome.first_token_at
    timings = {"latency_s": round(outcome.finished_at - ticket.submitted, 4),
               "scheduler_s": round(outcome.latency, 4),
               "first_token_s": None if first is None else round(first - ticket.submitted, 4)}
    out = {"run_id": ticket.rid, **outcome.to_json(), "usage": ticket.usage.to_json(),
           "timings": timings, "served_by": ticket.served_by}
    out.pop("id", None)
    out.pop("latency_s", None)
    return out
