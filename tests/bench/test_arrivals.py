"""Workload timing: seeded Poisson arrivals, offline all-at-once, and the async arrival order."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ragraph.bench.run.arrivals import arrive, offsets_for, poisson_offsets
from ragraph.errors import ConfigError
from ragraph.runtime.request import Request


def test_poisson_offsets_are_seeded_increasing_and_at_the_rate():
    a = poisson_offsets(4.0, 4000, seed=3)
    assert np.array_equal(a, poisson_offsets(4.0, 4000, seed=3))
    assert not np.array_equal(a, poisson_offsets(4.0, 4000, seed=4))
    assert a[0] == 0.0 and np.all(np.diff(a) >= 0)
    # 3,999 exponential gaps of mean 1/4 s: the empirical rate is within a few percent.
    assert a[-1] / 3999 == pytest.approx(0.25, rel=0.05)
    gaps = np.diff(a)
    assert np.std(gaps) == pytest.approx(np.mean(gaps), rel=0.08)  # exponential: std = mean


def test_offline_is_everything_at_time_zero():
    assert np.array_equal(offsets_for(None, 5, seed=0), np.zeros(5))


def test_bad_rate_names_the_flag():
    with pytest.raises(ConfigError, match="--rates"):
        poisson_offsets(0.0, 3, seed=0)


def test_arrive_yields_in_order_no_earlier_than_each_offset():
    requests = [Request(id=f"r{i}", question="q") for i in range(4)]
    offsets = [0.0, 0.01, 0.02, 0.05]

    async def collect():
        loop = asyncio.get_running_loop()
        start = loop.time()
        return [(r.id, loop.time() - start) async for r in arrive(requests, offsets)]

    got = asyncio.run(collect())
    assert [rid for rid, _ in got] == ["r0", "r1", "r2", "r3"]
    for (_, at), offset in zip(got, offsets, strict=True):
        assert at >= offset - 1e-3
