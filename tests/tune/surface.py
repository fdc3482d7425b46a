"""A synthetic cost/quality surface: quality rises with nprobe, top-k, rounds and generation
length and saturates; the time a request takes grows with each of them; concurrency and -O2 raise
throughput, -O2 lowers latency, concurrency raises it. No
engine: `measure` is the `Measure` tune's search calls, and it counts its calls."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragraph.tune.measure import Measurement
from ragraph.tune.space import Point, Space

SPACE = Space(nprobe=(4, 8, 16, 32), topk=(2, 5, 10), rounds=(1, 2, 3), passes=("-O0", "-O2"),
              concurrency=(1, 4, 16), gen_share=(0.5, 1.0))


def quality(p: Point) -> float:
    # Saturates: nprobe past 16 and top-k past 5 add nothing, so their settings are dominated.
    return (min(p.nprobe, 16) / 16 * 0.4 + min(p.topk, 5) / 5 * 0.3 + (p.rounds or 0) / 3 * 0.2
            + p.gen_share * 0.1)


def cost_s(p: Point) -> float:
    return 0.01 * p.nprobe + 0.02 * p.topk + 0.1 * (p.rounds or 0) + 0.05 * p.gen_share


def surface(p: Point, answers: dict[str, str] | None = None) -> Measurement:
    speedup = p.concurrency ** 0.5 * (1.3 if p.passes == "-O2" else 1.0)
    em = round(quality(p), 6)
    # An answer per question that depends on the quality knobs only (the exactness rule).
    said = answers or {f"q{i}": f"{p.quality}-{i}" for i in range(3)}
    passes = 1.3 if p.passes == "-O2" else 1.0
    return Measurement(p, em, em, em, speedup / cost_s(p),
                       cost_s(p) * p.concurrency ** 0.3 / passes, 0, tuple(sorted(said.items())))


@dataclass
class Counting:
    """A `Measure` on the surface that records every point it measured; `fail_after`: raise
    on the call after that many, as a kill would stop the run."""

    fail_after: int | None = None
    calls: list[str] = field(default_factory=list)

    async def __call__(self, point: Point) -> Measurement:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt
        self.calls.append(point.key)
        return surface(point)


def every_point() -> list[Measurement]:
    return [surface(SPACE.point(q, s)) for q in SPACE.quality_settings()
            for s in SPACE.speed_settings()]
