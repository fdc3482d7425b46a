"""Server-sent events as LLM servers stream them: `data: {json}` lines ending with `data: [DONE]`.

Pure parsing, shared by the OpenAI-compatible and the SGLang native HTTP engines.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from ragraph.errors import EngineError

DONE = "[DONE]"


@dataclass(frozen=True)
class SseData:
    """One `data:` payload: a JSON object, or `done` for the final `[DONE]`."""

    obj: dict[str, Any] | None
    done: bool = False


def parse_sse_line(line: str) -> SseData | None:
    """The payload of one SSE line, None for lines that carry none (blank, comments, `event:`,
    `id:`, `retry:`). Raises EngineError for a `data:` line that is not a JSON object."""
    line = line.rstrip("\r\n")
    if not line.startswith("data:"):
        if line == "" or line.startswith((":", "event:", "id:", "retry:")):
            return None
        raise EngineError(f"server sent something that is not server-sent events: {line[:120]!r}")
    payload = line[5:].strip()
    if payload == DONE:
        return SseData(None, done=True)
    try:
        obj = json.loads(payload)
    except json.JSONDecodeError as e:
        raise EngineError(f"server sent an event that is not JSON: {payload[:120]!r}") from e
    if not isinstance(obj, dict):
        raise EngineError(f"server sent an event that is not a JSON object: {payload[:120]!r}")
    return SseData(obj)


def server_error(obj: dict[str, Any]) -> str | None:
    """The message of an error event (`{"error": {"message": ...}}` or `{"error": "..."}`)."""
    err = obj.get("error")
    if err is None:
        return None
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


async def iter_events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of an SSE stream, in order; raises EngineError on an error event, on
    garbage, and when the stream ends before `[DONE]`."""
    async for line in lines:
        data = parse_sse_line(line)
        if data is None:
            continue
        if data.done or data.obj is None:
            return
        message = server_error(data.obj)
        if message is not None:
            raise EngineError(f"server error: {message}")
        yield data.obj
    raise EngineError("server closed the stream before [DONE] (a server-side failure; see its log)")
