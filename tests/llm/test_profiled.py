"""Step times from the measured profile: exact at its points, monotone between, roofline outside."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragraph.runtime.llm.sim.costmodel import GpuCostModel
from ragraph.runtime.llm.sim.profile import default_profile, write_profile
from ragraph.runtime.llm.sim.profiled import ProfiledCostModel, cost_model_for

MODEL = ProfiledCostModel(default_profile())


def test_exact_at_every_measured_point() -> None:
    for p in MODEL.profile.prefill:
        assert MODEL.prefill_s(p.tokens) == p.ms / 1e3
    for p in MODEL.profile.decode:
        assert MODEL.decode_step_s(p.batch, p.batch * p.context) == p.ms / 1e3


def test_prefill_is_monotone_and_between_its_neighbours() -> None:
    times = [MODEL.prefill_s(n) for n in range(128, 8193, 37)]
    assert times == sorted(times)
    assert 14.4e-3 < MODEL.prefill_s(700) < 26.4e-3
    # Piecewise linear: half-way in tokens is half-way in time.
    assert MODEL.prefill_s(768) == pytest.approx((14.4e-3 + 26.4e-3) / 2)


def test_decode_is_monotone_in_batch_and_in_context() -> None:
    by_batch = [MODEL.decode_step_s(b, b * 512) for b in range(1, 257)]
    assert by_batch == sorted(by_batch)
    by_context = [MODEL.decode_step_s(64, 64 * c) for c in range(512, 2049, 64)]
    assert by_context == sorted(by_context)
    # Between two measured batches and two measured contexts: inside their times.
    assert 8.6e-3 < MODEL.decode_step_s(100, 100 * 1000) < 18.9e-3


def test_roofline_outside_the_measured_shapes() -> None:
    roof = MODEL.roofline
    outside = [(100, 0, 0), (9000, 0, 0),  # prefill under / over the measured sizes
               (0, 1, 100),  # decode context under 512 a sequence
               (0, 8, 8 * 4096),  # over 2,048
               (0, 300, 300 * 512),  # batch over 256
               (0, 200, 200 * 1000),  # batch 256 was measured at 512 only
               (50, 10, 10 * 600)]  # a mixed step of 60 tokens: no prefill under 128
    for step in outside:
        assert MODEL.profiled_s(*step) is None
        assert MODEL.step_s(*step) == roof.step_s(*step)


def test_roofline_fallback_is_the_profiles_model_shape() -> None:
    roof = MODEL.roofline
    assert roof.kv_bytes_per_token == 131072
    assert roof.weight_bytes == pytest.approx(GpuCostModel().weight_bytes, rel=1e-3)


def test_the_measured_gaps_to_the_roofline_of_issue_15() -> None:
    """Decode steps 14-25% slower than the roofline, prefills of 512+ tokens 15-30% faster,
    short prefills 2x slower: what the default simulated engine now reproduces."""
    roof = GpuCostModel()
    for batch, context in ((1, 512), (64, 512), (128, 2048)):
        ratio = MODEL.decode_step_s(batch, batch * context) / roof.decode_step_s(
            batch, batch * context)
        assert 1.14 <= round(ratio, 2) <= 1.25
    assert 0.70 <= MODEL.prefill_s(1024) / roof.prefill_s(1024) <= 0.85
    assert MODEL.prefill_s(128) / roof.prefill_s(128) > 1.9


def test_a_mixed_step_costs_at_least_its_parts() -> None:
    decode = MODEL.decode_step_s(32, 32 * 1000)
    mixed = MODEL.step_s(600, 32, 32 * 1000)
    assert mixed >= decode and mixed >= MODEL.prefill_s(632)
    assert MODEL.step_s(0, 0, 0) == 0.0


def test_cost_model_for_each_choice(tmp_path: Path) -> None:
    assert cost_model_for(None) == MODEL
    assert isinstance(cost_model_for("roofline"), GpuCostModel)
    path = tmp_path / "mine.json"
    write_profile(default_profile(), path)
    mine = cost_model_for(str(path))
    assert "profile mine" in mine.label and "roofline outside" in mine.label
    assert "roofline" in cost_model_for("roofline").label
