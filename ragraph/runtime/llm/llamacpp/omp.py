"""llama.cpp's OpenMP waits kept short, whatever loaded the OpenMP runtime first.

ggml's CPU threads meet at OpenMP barriers hundreds of times a forward pass, and libgomp (GCC's
OpenMP runtime) spins at a barrier before it sleeps: 300,000 spins unless GOMP_SPINCOUNT or
OMP_WAIT_POLICY said otherwise when the library loaded, the only time it reads them. A process
holds one `libgomp.so.1`, and llama.cpp binds to whichever loaded first: torch's wheel ships one
under that name, so an app that imported torch (or faiss, then torch) before ragraph has fixed
the spin before ragraph could set anything. On a busy machine that long spin is what made the
API 6-10x slower than the CLI: a thread spinning at a barrier holds the core its partner needs
to reach it (docs/benchmarks/python-api.md). The CLI was fast only by accident: faiss bound to
the same runtime there, and its idle threads put it over the core count.

libgomp's manual (GOMP_SPINCOUNT) gives the rule that bounds the spin without the environment:
"If there are more OpenMP threads than available CPUs, 1000 and 100 spins are used". While the
engine runs, `SpinBound` parks a team of idle threads in the runtime llama.cpp calls, enough to
put that runtime over the cores, and releases it when the engine closes. A user's own
GOMP_SPINCOUNT or OMP_WAIT_POLICY wins (nothing is held), and a runtime that is not libgomp
(macOS, MSVC) has no `GOMP_parallel`: nothing to do there.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from pathlib import Path

from ragraph.runtime.threads import usable_cores

USER_SETTINGS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")


def team_size(n_threads: int, cores: int) -> int:
    """Threads to park so that the runtime counts more threads than `cores` beside the
    engine's team of `n_threads`: libgomp counts the first thread, then each team's others
    (1 + (n_threads - 1) + (size - 1) > cores)."""
    return max(2, cores - n_threads + 2)


class SpinBound:
    """Holds a parked OpenMP team in llama.cpp's runtime from `start()` to `close()`."""

    def __init__(self, n_threads: int, cores: int | None = None) -> None:
        self.size = team_size(n_threads, cores or usable_cores())
        self._needed = n_threads > 1  # one thread never waits at a barrier
        self._release = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        return self._thread is not None

    def start(self) -> SpinBound:
        if not self._needed or any(name in os.environ for name in USER_SETTINGS):
            return self
        parallel = _gomp_parallel()
        if parallel is None:
            return self
        parked = threading.Event()
        self._thread = threading.Thread(target=self._hold, args=(parallel, parked),
                                        name="ragraph-omp-bound", daemon=True)
        self._thread.start()
        parked.wait()
        return self

    def close(self) -> None:
        """Lets the team go (its threads leave with the holding thread)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._release.set()
            thread.join()

    def _hold(self, parallel: Callable[..., None], parked: threading.Event) -> None:
        # Each thread of the team runs free(NULL), which does nothing; the team then stays
        # parked in this thread's pool until the thread ends.
        parallel(ctypes.cast(_libc().free, ctypes.c_void_p), None, self.size, 0)
        parked.set()
        self._release.wait()


def _gomp_parallel() -> Callable[..., None] | None:
    """`GOMP_parallel` of the OpenMP runtime llama.cpp's CPU backend is bound to (looked up
    through that library, so it is that copy of libgomp), or None."""
    import llama_cpp

    libs = sorted((Path(llama_cpp.__file__).parent / "lib").glob("libggml-cpu.so*"))
    if not libs:
        return None
    try:
        parallel = ctypes.CDLL(str(libs[0])).GOMP_parallel
    except (OSError, AttributeError):
        return None
    parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    parallel.restype = None
    return parallel


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None)
