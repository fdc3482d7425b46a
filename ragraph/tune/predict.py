"""The speed model: a point's throughput and p95 predicted before it is measured, so the search
skips the points the prediction says are dominated by a margin.

Every quality setting is measured once at the reference speed setting (its quality is needed
anyway, and the speed comes with it), so what is left to predict is what a speed setting
(passes, concurrency, release, the simulated engine's budget) does to a setting. The model
carries that over from the measured setting most like it: throughput(q, s) = throughput(q, ref)
x throughput(q', s) / throughput(q', ref), p95 likewise, where q' is the setting already
measured at s whose reference throughput is nearest q's.
Nearest, not an average over every setting: a speed knob's effect depends on how heavy a request
is (a search-bound setting gains less from concurrency than one that waits on the LLM).

The first setting measured at each speed setting calibrates it and has no prediction. ragraph's
step cost models (the IVF per-cluster cost, the simulated engine's GPU profile) price one engine
step, not a workflow's request under the scheduler's overlap of the two sides: they are not what
is predicted from here (docs/guides/tuning.md says how close this is).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ragraph.tune.measure import Measurement, Predicted
from ragraph.tune.space import Point, Speed

# A point is skipped only when measured points beat its prediction by this much in both speeds:
# the error the model is held to (within 20% of the measured).
MARGIN = 0.2


def predict(point: Point, reference: tuple, measured: Sequence[Measurement]) -> Predicted | None:
    """`point`'s speed from its setting's reference measurement (`reference`: a `Speed` or its
    leading knobs) and the nearest setting's measured effect of `point`'s speed setting; None
    when either is not measured yet."""
    ref = Speed(*reference)
    at_ref = {m.point.quality: m for m in measured if m.point.speed == ref}
    mine = at_ref.get(point.quality)
    pairs = [(at_ref[m.point.quality], m) for m in measured
             if m.point.speed == point.speed and m.point.quality in at_ref]
    if mine is None or not pairs or mine.throughput_rps <= 0:
        return None
    base, there = min(pairs, key=lambda pair: abs(math.log(
        max(pair[0].throughput_rps, 1e-12) / mine.throughput_rps)))
    if base.throughput_rps <= 0 or base.p95_s <= 0:
        return None
    return Predicted(mine.throughput_rps * there.throughput_rps / base.throughput_rps,
                     mine.p95_s * there.p95_s / base.p95_s)


def predicted_out(guess: Predicted, quality: tuple[float, ...],
                  measured: Sequence[Measurement], margin: float = MARGIN) -> bool:
    """Whether measured points that answer at least as well (`quality`: the setting's, known
    from its reference measurement) beat `guess` by `margin` on both fronts: one faster in
    throughput, one (maybe another) lower in p95, even were the guess `margin` too pessimistic.
    Such a point could be on neither front."""
    good = [m for m in measured if m.quality >= quality and m.errors == 0]
    faster = any(m.throughput_rps >= guess.throughput_rps * (1 + margin) for m in good)
    quicker = any(m.p95_s * (1 + margin) <= guess.p95_s for m in good)
    return faster and quicker
