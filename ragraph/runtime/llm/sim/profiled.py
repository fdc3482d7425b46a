"""Step times interpolated from a measured GPU profile, the roofline outside it.

Prefill is piecewise linear in tokens between measured sizes. A decode step of `batch` sequences
with `context` tokens in all is interpolated in batch and in context per sequence: at a measured
batch it is linear in context, i.e. in the KV cache the step reads; between two measured batches
it is linear in batch at the same context per sequence. Both are exact at the measured points and
monotone between monotone points. A shape outside the measured ranges (fewer prompt tokens than the
smallest measured prefill, a context per sequence outside those measured at the neighbouring
batches, ...) gets the roofline of the profile's model shape: the profile never extrapolates.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ragraph.runtime.llm.sim.costmodel import GpuCostModel, LlmCostModel
from ragraph.runtime.llm.sim.profile import GpuProfile, default_profile, load_profile

ROOFLINE = "roofline"  # `--profile roofline`: the datasheet model alone


@dataclass(frozen=True)
class ProfiledCostModel:
    profile: GpuProfile

    @cached_property
    def roofline(self) -> GpuCostModel:
        return GpuCostModel.for_shape(self.profile.shape, self.profile.gpu)

    @property
    def label(self) -> str:
        p = self.profile
        return (f"{p.model} on {p.gpu}, measured profile {p.name} of {p.measured_points} points, "
                "roofline outside them")

    def step_s(self, prefill_tokens: int, decode_batch: int, context_tokens: int) -> float:
        if prefill_tokens == 0 and decode_batch == 0:
            return 0.0
        profiled = self.profiled_s(prefill_tokens, decode_batch, context_tokens)
        if profiled is None:
            return self.roofline.step_s(prefill_tokens, decode_batch, context_tokens)
        return profiled

    def prefill_s(self, prompt_tokens: int) -> float:
        return self.step_s(prompt_tokens, 0, 0)

    def decode_step_s(self, batch: int, context_tokens: int) -> float:
        return self.step_s(0, batch, context_tokens)

    def profiled_s(self, prefill_tokens: int, decode_batch: int,
                   context_tokens: int) -> float | None:
        """The profile's time of a step, or None where the profile does not cover its shape."""
        if decode_batch == 0:
            return self._prefill_s(prefill_tokens)
        decode = self._decode_s(decode_batch, context_tokens)
        if prefill_tokens == 0:
            return decode
        prefill = self._prefill_s(prefill_tokens + decode_batch)
        if prefill is None:
            return None
        # A mixed step runs eagerly like a prefill (engines replay CUDA graphs for decode-only
        # batches) over all its tokens, and also reads the decoding sequences' KV cache. It is
        # never cheaper than its decode step alone.
        return max(prefill + self.roofline.kv_read_s(context_tokens), decode or 0.0)

    @cached_property
    def _prefill_curve(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        points = self.profile.prefill
        return tuple(float(p.tokens) for p in points), tuple(p.ms / 1e3 for p in points)

    @cached_property
    def _decode_curves(self) -> dict[int, tuple[tuple[float, ...], tuple[float, ...]]]:
        """Per measured batch: contexts per sequence and step seconds, ascending."""
        curves: dict[int, tuple[list[float], list[float]]] = {}
        for p in self.profile.decode:  # sorted by (batch, context)
            xs, ys = curves.setdefault(p.batch, ([], []))
            xs.append(float(p.context))
            ys.append(p.ms / 1e3)
        return {b: (tuple(xs), tuple(ys)) for b, (xs, ys) in curves.items()}

    def _prefill_s(self, tokens: int) -> float | None:
        return _lerp(*self._prefill_curve, float(tokens))

    def _decode_s(self, batch: int, context_tokens: int) -> float | None:
        curves = self._decode_curves
        batches = tuple(curves)  # ascending: built from the sorted points
        per_sequence = context_tokens / batch
        i = bisect_left(batches, batch)
        if i == len(batches) or (batches[i] != batch and i == 0):
            return None
        hi = batches[i]
        lo = hi if hi == batch else batches[i - 1]
        at_lo = _lerp(*curves[lo], per_sequence)
        at_hi = _lerp(*curves[hi], per_sequence)
        if at_lo is None or at_hi is None:
            return None
        return _lerp((float(lo), float(hi)), (at_lo, at_hi), float(batch))


def _lerp(xs: Sequence[float], ys: Sequence[float], x: float) -> float | None:
    """Piecewise linear through (xs, ys), xs ascending; None outside [xs[0], xs[-1]]."""
    if not xs or x < xs[0] or x > xs[-1]:
        return None
    i = bisect_left(xs, x)
    if xs[i] == x:
        return ys[i]
    t = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ys[i - 1] + t * (ys[i] - ys[i - 1])


def cost_model_for(profile: str | None) -> LlmCostModel:
    """The simulated engine's timing: None = the shipped H100 / Llama-3.1-8B profile,
    `roofline` = the datasheet model alone, else a profile file."""
    if profile is None:
        return ProfiledCostModel(default_profile())
    if profile == ROOFLINE:
        return GpuCostModel()
    return ProfiledCostModel(load_profile(Path(profile)))
