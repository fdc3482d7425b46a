"""Timeline of a run as a Chrome trace (opens in Perfetto / chrome://tracing).

One process track for the engines (a thread each: llm, search, embed) and one for the requests (a
thread each), so overlap between retrieval and generation is visible at a glance.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENGINES_PID = 1
REQUESTS_PID = 2


@dataclass(frozen=True)
class TraceSpan:
    track: str  # "llm", "search", ... or a request id
    name: str
    start: float  # seconds, monotonic
    end: float
    args: dict[str, Any] = field(default_factory=dict)
    engine: bool = True


class Tracer:
    """Thread-safe collector of timed spans; cheap enough to leave on."""

    def __init__(self, clock=time.perf_counter) -> None:
        self._clock = clock
        self._origin = clock()
        self._spans: list[TraceSpan] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._clock()

    def add(self, span: TraceSpan) -> None:
        with self._lock:
            self._spans.append(span)

    def add_span(self, track: str, name: str, start: float, end: float, engine: bool = True,
                 **args: Any) -> None:
        self.add(TraceSpan(track, name, start, end, dict(args), engine))

    @contextmanager
    def span(self, track: str, name: str, engine: bool = True, **args: Any) -> Iterator[None]:
        start = self._clock()
        try:
            yield
        finally:
            self.add(TraceSpan(track, name, start, self._clock(), dict(args), engine))

    def spans(self) -> list[TraceSpan]:
        with self._lock:
            return list(self._spans)

    def overlap_seconds(self, a: str, b: str) -> float:
        """Total time during which tracks `a` and `b` were both busy."""
        return _overlap(_merged(self.spans(), a), _merged(self.spans(), b))

    def to_chrome(self) -> dict[str, Any]:
        """Chrome trace events; overlapping spans of one engine track go to numbered lanes."""
        events: list[dict[str, Any]] = []
        tids: dict[tuple[int, str], int] = {}
        lane_ends: dict[str, list[float]] = {}
        for s in sorted(self.spans(), key=lambda s: s.start):
            pid = ENGINES_PID if s.engine else REQUESTS_PID
            track = _lane(lane_ends, s) if s.engine else s.track
            tid = tids.setdefault((pid, track), len(tids) + 1)
            events.append({
                "name": s.name, "ph": "X", "pid": pid, "tid": tid,
                "ts": (s.start - self._origin) * 1e6, "dur": max(s.end - s.start, 0.0) * 1e6,
                "args": s.args,
            })
        meta = [{"name": "process_name", "ph": "M", "pid": p, "args": {"name": n}}
                for p, n in ((ENGINES_PID, "engines"), (REQUESTS_PID, "requests"))]
        meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": track}}
                 for (pid, track), tid in tids.items()]
        return {"traceEvents": meta + events, "displayTimeUnit": "ms"}

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_chrome()))


def _lane(lane_ends: dict[str, list[float]], span: TraceSpan) -> str:
    """The first lane of the span's track that is free at its start (Perfetto needs slices of
    one thread to nest, and concurrent generations do not)."""
    ends = lane_ends.setdefault(span.track, [])
    for i, end in enumerate(ends):
        if end <= span.start:
            ends[i] = span.end
            return span.track if i == 0 else f"{span.track} #{i + 1}"
    ends.append(span.end)
    return span.track if len(ends) == 1 else f"{span.track} #{len(ends)}"


def _merged(spans: list[TraceSpan], track: str) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s in sorted((s for s in spans if s.track == track), key=lambda s: s.start):
        if out and s.start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], s.end))
        else:
            out.append((s.start, s.end))
    return out


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(hi - lo, 0.0)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
