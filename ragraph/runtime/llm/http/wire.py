"""Numbers read out of a server's JSON chunks. A field that does not hold what the API says is the
server's fault: an `EngineError` that names the field and the value, never a `ValueError` from
deep inside a parser (which would read as a bug in ragraph)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragraph.errors import EngineError


def count(obj: Mapping[str, Any], key: str, where: str, default: int) -> int:
    """A token count at `obj[key]` (`where` names `obj`, as in "usage"); `default` when the
    server left it out (absent, null or 0: several servers send 0 for "not counted")."""
    value = obj.get(key)
    if value is None or value == 0:
        return default
    return whole(value, f"{where}.{key}")


def whole(value: object, field: str) -> int:
    """A non-negative integer (token id or count): an int, an integral float or a string of
    digits, as lenient servers write them."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    raise malformed(f"{field} {value!r:.60} is not a non-negative integer")


def real(value: object, field: str) -> float:
    """A number (a logprob)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise malformed(f"{field} {value!r:.60} is not a number")


def malformed(what: str) -> EngineError:
    return EngineError(f"malformed response: {what}")
