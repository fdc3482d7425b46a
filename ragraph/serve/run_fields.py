"""The fields of LangGraph's run API (what `langgraph-sdk`'s `client.runs.wait/stream` and
`RemoteGraph` send) besides `assistant_id`/`workflow`, `input` and `stream_mode`.

ragraph's runs are stateless: no threads, checkpoints, interrupts, commands, webhooks or
scheduled starts. A field asking for one of those is 400 naming it (never silently dropped);
the SDK's own defaults (`stream_subgraphs: false`, `stream_resumable: false`) pass. Fields that
change nothing about a stateless run are accepted: `config` and `context` (a workflow's settings
are its `.rag` file's), `metadata`, `if_not_exists` and `multitask_strategy` (threads only),
`on_completion`, `durability`, `feedback_keys`, `langsmith_tracer`, and `on_disconnect:
"cancel"` (what ragraph does: a run whose client leaves is cancelled). A JSON null is the field
left out, as the SDK sends it."""

from __future__ import annotations

from typing import Any

from ragraph.serve.http_error import HttpError

STATELESS = "ragraph serve runs are stateless"
REFUSED = {
    "command": "commands resume interrupted threads",
    "checkpoint": "there are no checkpoints",
    "checkpoint_id": "there are no checkpoints",
    "interrupt_before": "runs are not interrupted",
    "interrupt_after": "runs are not interrupted",
    "webhook": "no webhooks are called",
    "after_seconds": "runs start when asked",
    "stream_resumable": "a stream is not kept to resume",
    "stream_subgraphs": "a workflow has no subgraphs",
}


def check_run_fields(body: dict[str, Any]) -> None:
    for name, why in REFUSED.items():
        value = body.get(name)
        if value not in (None, False, [], {}):
            raise HttpError(400, f"{name}: not supported ({STATELESS}: {why})", name)
    if body.get("on_disconnect") not in (None, "cancel"):
        raise HttpError(400, f"on_disconnect: only \"cancel\" is supported ({STATELESS}: a "
                        "run whose client leaves is cancelled)", "on_disconnect")
