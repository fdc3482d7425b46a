"""What the generation side reads off an engine that batches on its own (engine_gauge.py)."""

from __future__ import annotations

import pytest

from ragraph.runtime.llm.protocol import EngineCounters
from ragraph.runtime.scheduler.engine_gauge import EngineGauge


def counters(**fields) -> EngineCounters:
    return EngineCounters(**fields)


def test_free_prompt_tokens_come_from_the_engines_own_timers():
    gauge = EngineGauge()
    timed = counters(steps=10, decode_steps=8, decode_s=0.048, prefill_s=0.1, prompt_tokens=4000)
    assert gauge.free_prompt_tokens(timed) is None  # nothing submitted yet
    gauge.submitted("x" * 16_000)
    assert gauge.free_prompt_tokens(timed) == pytest.approx(240.0)  # a decode step's prompt work
    assert gauge.free_prompt_tokens(counters(steps=1, prompt_tokens=4000, prefill_s=0.1)) == 0.0
    assert gauge.free_prompt_tokens(counters()) is None  # steps not observable (HTTP)
    assert gauge.tokens(timed, "x" * 400) == pytest.approx(100.0)  # 4 characters a token, as measured


def test_the_drain_is_the_longest_generation_at_the_measured_step():
    gauge = EngineGauge()
    timed = counters(decode_steps=10, decode_s=0.06)
    assert gauge.drain_ms(timed, [3, 20, 5]) == pytest.approx(120.0)
    assert gauge.drain_ms(timed, []) is None
    assert gauge.drain_ms(counters(), [20]) is None  # no decode step timed
