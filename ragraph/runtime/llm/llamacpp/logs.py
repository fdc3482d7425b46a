"""llama.cpp's log lines from ragraph's own calls are dropped; anyone else's go where they went.

llama.cpp has one log callback per process, and it logs while it loads and frees a model and
during decodes (graph inputs, KV copies between streams): a CLI answer must not come with that.
Setting a silent callback for the whole process would silence a host application's own
llama.cpp use (the Python API, LangChain), and llama-cpp-python's callback, which a bare import
installs, prints everything. So ragraph installs a router once: a line logged on a thread that is
inside one of ragraph's llama.cpp calls is dropped, any other line goes to the callback that was
installed before the router (llama-cpp-python's, or the host's own).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
from collections.abc import Iterator

import llama_cpp

_HERE = threading.local()
_LOCK = threading.Lock()
_before: tuple[llama_cpp.llama_log_callback, ctypes.c_void_p] | None = None


@llama_cpp.llama_log_callback
def _route(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    if getattr(_HERE, "depth", 0):
        return
    before = _before
    if before is not None and before[0]:
        before[0](level, text, before[1])
    else:  # no callback before: llama.cpp's own default writes to stderr
        sys.stderr.write(text.decode("utf-8", errors="replace"))


def _address(callback: object) -> int | None:
    return ctypes.cast(callback, ctypes.c_void_p).value


def _ensure_router() -> None:
    """Install the router unless it is the process's callback now. A host that set its own
    callback since gets it back for its lines: the router is put in front of it again."""
    global _before
    with _LOCK:
        current = llama_cpp.llama_log_callback()
        user_data = ctypes.c_void_p()
        llama_cpp.llama_log_get(ctypes.byref(current), ctypes.byref(user_data))
        if _address(current) == _address(_route):
            return
        _before = (current, user_data)
        llama_cpp.llama_log_set(_route, ctypes.c_void_p(0))


@contextlib.contextmanager
def silent_here(install: bool = False) -> Iterator[None]:
    """Drop llama.cpp's lines logged on this thread inside the block. `install`: (re)install the
    router first (at a model's load: cheap, but not per decode)."""
    if install:
        _ensure_router()
    _HERE.depth = getattr(_HERE, "depth", 0) + 1
    try:
        yield
    finally:
        _HERE.depth -= 1
