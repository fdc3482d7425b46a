"""A finished request as JSON: the run API's `end` event and `/runs/wait` body, event payloads,
and the error a failed request answers with."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ragraph.ir.values import Items, Passages, Value
from ragraph.runtime.hub import Ticket
from ragraph.runtime.outcome import Outcome
from ragraph.serve.bodies import Ask, HttpError

# A workflow input's own check names it `inputs.NAME` (runtime.request); the API calls it
# `input.NAME`.
_INPUT_FIELD = re.compile(r"^inputs?\.([A-Za-z_][\w]*): ")


def failure(outcome: Outcome, ask: Ask) -> HttpError:
    """The status of a request that failed, by whose fault it was: the client's (400, naming
    the field: a question whose prompt outgrows the model's context is `ask.question_field`),
    the upstream engine's (502), the server shutting down (503), or the workflow's or a bug
    (500; a bug's details stay in the server log, where the hub wrote them)."""
    kind, error = outcome.error_kind or "internal", outcome.error or "failed"
    if kind == "input":
        named = _INPUT_FIELD.match(error)
        field = f"input.{named.group(1)}" if named else ask.question_field
        return HttpError(400, error if named else f"{field}: {error}", field)
    if kind == "engine":
        return HttpError(502, f"upstream engine failed: {error}")
    if kind == "cancelled":
        return HttpError(503, error, headers={"Retry-After": "1"})
    if kind == "workflow":
        return HttpError(500, f"the workflow failed: {error}", type="workflow_error")
    return HttpError(500, f"internal error while running the workflow (run {outcome.rid}; the "
                     "server log has the details)")


def values_json(values: Mapping[str, Value]) -> dict[str, Any]:
    """Variables as JSON: text as text, retrieved passages as their ids and titles, a list (a
    list output, a map's results) as a list of those."""
    return {name: value_json(v) for name, v in values.items()}


def passages_json(passages: Passages | None) -> list[dict[str, Any]]:
    return [p.to_json(text=False) for p in passages or ()]


def value_json(value: Value) -> Any:
    """One `ragraph.ir.values.Value`; a type it does not know is a bug (TypeError), which the
    stream reports as an `error` event rather than a cut body."""
    if isinstance(value, Passages):
        return passages_json(value)
    if isinstance(value, Items):
        return [value_json(v) for v in value.values]
    if isinstance(value, str):
        return str(value)  # GeneratedText too: its text
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        # JSON has no NaN or infinity; JavaScript's spelling, as a string, says what it was.
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    raise TypeError(f"no JSON form for a {type(value).__name__} value")


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
