"""One percentile for every report: the run summary, the HTTP load bench, the server-alone
replay and `serve --adapt`'s p95 read the same latencies alike (numpy's interpolation)."""

from __future__ import annotations

import math

import numpy as np

from ragraph.bench.run.http_load import LoadReport, LoadSpec, Shot
from ragraph.bench.server.alone import Replay
from ragraph.runtime.outcome import Outcome, percentile, summarize
from ragraph.serve.adapt import p95

LATENCIES = (0.3, 1.7, 0.9, 2.4, 0.5, 1.1, 0.8)


def _outcome(latency: float) -> Outcome:
    return Outcome(rid="r", question="q", answer="a", error=None, path=(), passages=None,
                   golden_answers=(), admitted_at=10.0, finished_at=10.0 + latency)


def test_percentile_interpolates_as_numpy_and_says_what_no_values_give():
    assert percentile(LATENCIES, 95) == float(np.percentile(LATENCIES, 95))
    assert percentile([], 95) is None and percentile([], 50, 0.0) == 0.0


def test_every_report_reads_the_same_p95():
    expected = percentile(LATENCIES, 95)
    shots = tuple(Shot("w", 200, s) for s in LATENCIES)
    report = LoadReport(LoadSpec("http://x", len(shots), None), shots, wall_s=1.0)
    summary = summarize([_outcome(s) for s in LATENCIES], wall_s=1.0)
    replay = Replay(wall_s=1.0, latencies=LATENCIES, failed=0, workers=1)
    assert math.isclose(summary.p95_s, expected)  # from finished_at - admitted_at
    assert report.latency(95) == replay.latency(95) == p95(LATENCIES) == expected
    # No values: each says so its own way, as before.
    assert report.latency(95) is not None and LoadReport(report.spec, (), 1.0).latency(95) is None
    assert Replay(1.0, (), 0, 1).latency(95) == 0.0 and math.isnan(p95([]))
