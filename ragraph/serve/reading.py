"""Reading a request body: JSON only, within the size limit and the body timeout, and checked
throughout (depth, Unicode, numbers) before any parser sees it, so every mistake a client can
make in a body is a 4xx that says what was wrong:

    415  not declared `Content-Type: application/json`. This also refuses what a web page may
         send to this server cross-site without the browser asking first (a text/plain or form
         body, or a body with no type), so a page the user visits cannot drive a server on
         their machine (CSRF).
    413  over --max-body-bytes, declared or streamed
    408  not received within --body-timeout (a client that stalls mid-body; the connection is
         then closed)
    400  not JSON, nested deeper than MAX_DEPTH, a string that is not Unicode (a lone surrogate,
         `"\\ud800"`), NaN or infinity; the field named
    499  the client went away while sending it (counted in the metrics, not logged)
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from starlette.requests import ClientDisconnect, Request

from ragraph.errors import ConfigError
from ragraph.runtime.request import check_text
from ragraph.serve.http_error import HttpError
from ragraph.serve.settings import ServeSettings

# The deepest body a workflow reads is OpenAI's messages[i].content[j].text (5 levels); JSON
# nested far deeper is an attack on recursive code, refused before any of it runs.
MAX_DEPTH = 32
JSON_TYPE = "application/json"


async def read_json(request: Request, settings: ServeSettings) -> dict[str, Any]:
    """The body as a JSON object, or the HttpError that says why not."""
    _check_type(request.headers.get("content-type"))
    limit = settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    try:
        async with asyncio.timeout(settings.body_timeout_s):
            raw = await _read(request, limit)
    except TimeoutError:
        raise HttpError(408, f"body: not received within {settings.body_timeout_s:g} s "
                        "(--body-timeout)", "body", headers={"Connection": "close"}) from None
    except ClientDisconnect:
        raise HttpError(499, "body: the client closed the connection while sending it",
                        "body") from None
    body = _parse(raw)
    if not isinstance(body, dict):
        raise HttpError(400, "body: expected a JSON object", "body")
    check_tree(body)
    return body


def _check_type(declared: str | None) -> None:
    media = (declared or "").split(";", 1)[0].strip().lower()
    if media != JSON_TYPE:
        got = "no Content-Type" if declared is None else f"Content-Type {declared[:80]!r}"
        raise HttpError(415, f"content-type: the body must be JSON, sent with 'Content-Type: "
                        f"{JSON_TYPE}' (got {got})", "content-type")


async def _read(request: Request, limit: int) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:  # the C parser recurses once a level: far too deep for MAX_DEPTH
        raise HttpError(400, f"body: JSON nested deeper than {MAX_DEPTH} levels",
                        "body") from None
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError, and a 5,000-digit int
        raise HttpError(400, f"body: not valid JSON: {err}", "body") from err


def check_tree(value: Any, path: str = "", depth: int = 0) -> None:
    """Every string valid Unicode, every number finite, nothing deeper than MAX_DEPTH; `path`
    names the field as the errors of the parsers do (`messages[0].content`, `input.question`)."""
    where = path or "body"
    if depth > MAX_DEPTH:
        raise HttpError(400, f"{where}: JSON nested deeper than {MAX_DEPTH} levels", where)
    if isinstance(value, str):
        _check_text(value, where)
    elif isinstance(value, float) and not math.isfinite(value):
        raise HttpError(400, f"{where}: must be a finite number, got {json.dumps(value)}", where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, f"{where} (a key)")
            check_tree(item, f"{path}.{key}" if path else key, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_tree(item, f"{path}[{i}]", depth + 1)


def _check_text(text: str, where: str) -> None:
    # The field's own name may hold the surrogate (a key): it is named in escapes.
    where = where.encode("utf-8", "backslashreplace").decode("utf-8")
    try:
        check_text(text, where)
    except ConfigError as err:
        raise HttpError(400, str(err), where) from None


def _too_large(limit: int) -> HttpError:
    return HttpError(413, f"body: larger than this server's limit of {limit} bytes "
                     "(--max-body-bytes)", "body")
