"""The roofline numbers of DESIGN.md for Llama-3.1-8B bf16 on one H100."""

import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.llm.sim.costmodel import GpuCostModel


def test_decode_step_at_batch_one_is_about_six_ms() -> None:
    m = GpuCostModel()
    # 16.06 GB / 3.35 TB/s = 4.79 ms of weight reads + 1 ms overhead (+ a little KV).
    assert m.decode_step_s(1, 500) == pytest.approx(5.81e-3, rel=0.01)


def test_decode_grows_slowly_with_batch_and_context() -> None:
    m = GpuCostModel()
    small = m.decode_step_s(1, 500)
    big = m.decode_step_s(32, 32 * 2000)  # 64k tokens of KV = 8.6 GB more to read
    assert small < big < 3 * small


def test_prefill_of_1000_tokens_is_compute_bound_around_34_ms() -> None:
    m = GpuCostModel()
    # 2 x 8.03e9 x 1000 FLOPs at 50% of 989 TFLOP/s = 32.5 ms, + 1 ms overhead.
    assert m.prefill_s(1000) == pytest.approx(33.5e-3, rel=0.02)


def test_constants_are_overridable_and_validated() -> None:
    assert GpuCostModel(step_overhead_s=0).decode_step_s(1, 0) < GpuCostModel().decode_step_s(1, 0)
    with pytest.raises(ConfigError, match="prefill_utilization"):
        GpuCostModel(prefill_utilization=0)
