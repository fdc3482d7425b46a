"""The checks the configuration's parts share; each error names the field it is about.

The sizes a user gives are bounded here, at the edge, each bound with its reason (the failures
guide lists them: docs/guides/failures.md#sizes-and-bounds). A bound is far above any setting
that serves better than a smaller one, and below what crashes or exhausts the machine."""

from __future__ import annotations

import functools
import types
import typing
from typing import Any

from ragraph.errors import ConfigError

# Threads (llama.cpp's, faiss's): past the hardware threads of the largest two-socket servers
# (~512). 100,000 OpenMP threads crashed faiss with a segfault instead of an error.
MAX_THREADS = 1024
# Requests in flight: SGLang and vLLM batch a few hundred sequences per GPU at most; each request
# in flight holds its state and, on llama.cpp, KV cells.
MAX_CONCURRENCY = 4096
# IVF lists probed per query: the lists of an index of 2^28 passages at ragraph's 4·sqrt(n).
MAX_NPROBE = 65536
# A context length (llama.cpp allocates its KV cells for it up front): the longest contexts
# models state (1M tokens).
MAX_CONTEXT = 1 << 20
# Shard actors (each a Ray actor holding part of the lists).
MAX_SHARDS = 1024
# A question (or any text a request gives): a million characters is ~250k tokens, past the
# context of the models ragraph serves; a 50 MB question took 82 s and 8 GB before it failed.
MAX_TEXT_CHARS = 1_000_000


def positive_int(name: str, value: object, most: int | None = None) -> None:
    """`value` is an int >= 1 (a bool is not: True would pass as 1), and at most `most`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(name, f"must be a positive integer, got {value!r}")
    if most is not None and value > most:
        raise ConfigError(name, f"must be at most {most:,}, got {value:,}")


def http_url(name: str, value: str | None, what: str = "an http(s):// URL") -> None:
    """`value`, when given, starts with http:// or https://."""
    if value is not None and not value.startswith(("http://", "https://")):
        raise ConfigError(name, f"must be {what}, got {value!r}")


def check_type(name: str, value: object, hint: Any, where: str = "") -> None:
    """`value` is of its knob's type `hint` (`ray = 5` is not an address): checked before a
    part is built from it, whose checks assume the type. `where`: the file it was given in."""
    if not accepts(hint, value):
        raise ConfigError(name, f"{where}must be {describe(hint)}, got {value!r}")


@functools.cache
def hints(cls: type) -> dict[str, Any]:
    """A config part's fields and their types (resolved: the modules postpone annotations)."""
    return typing.get_type_hints(cls)


def accepts(hint: Any, value: object) -> bool:
    """Whether `value` (as a TOML file or a keyword gives it) is of a knob's type `hint`: a
    bool is not a number, an int is a float, a list is a tuple of its items' type."""
    if hint is Any:
        return True
    arms = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(accepts(arm, value) for arm in arms)
    if hint is type(None):
        return value is None
    if typing.get_origin(hint) is tuple:
        return isinstance(value, list | tuple) and all(accepts(arms[0], v) for v in value)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return not isinstance(hint, type) or isinstance(value, hint)


def describe(hint: Any) -> str:
    """A knob's type as the error says it (`text`, `an integer or nothing`...)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return " or ".join(describe(arm) for arm in typing.get_args(hint) if arm is not type(None))
    if typing.get_origin(hint) is tuple:
        return f"a list of {describe(typing.get_args(hint)[0])}"
    return {str: "text", int: "an integer", float: "a number", bool: "true or false"}.get(
        hint, getattr(hint, "__name__", str(hint)))
