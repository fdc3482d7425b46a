"""The search latency read from a run's trace (`bench.measure.search_latency`): each retrieval's
time from its query ready to its top-k, its parts where ragraph's search side says them, and the
speculative retrievals and other requests' spans left out."""

from __future__ import annotations

import pytest

from ragraph.bench.measure.search_latency import (
    SearchLatency,
    retrieval_share,
    search_columns,
    search_latency,
)
from ragraph.runtime.outcome import Outcome
from ragraph.runtime.trace import Tracer


def outcome(rid: str, latency: float) -> Outcome:
    return Outcome(rid=rid, question="q", answer="a", error=None, path=(), passages=None,
                   golden_answers=(), admitted_at=0.0, finished_at=latency)


def traced(parts: bool = True) -> Tracer:
    tracer = Tracer(clock=lambda: 0.0)
    # Three retrievals of two requests: 0.1 s, 0.2 s and 0.6 s from the query to the top-k.
    for rid, start, end, queue, embed, scan in (
            ("a", 0.0, 0.1, 0.01, 0.01, 0.05), ("a", 1.0, 1.2, 0.03, 0.02, 0.1),
            ("b", 0.3, 0.9, 0.3, 0.05, 0.2)):
        args = {"queue_s": queue, "embed_s": embed, "scan_s": scan} if parts else {}
        tracer.add_span(rid, "retrieve search", start, end, engine=False, **args)
    tracer.add_span("a", "warm search", 0.0, 5.0, engine=False)  # speculative: not a retrieval
    tracer.add_span("a", "generate answer", 0.2, 1.0, engine=False)
    tracer.add_span("c", "retrieve search", 0.0, 9.0, engine=False)  # not among the outcomes
    tracer.add_span("search", "step x2", 0.0, 0.05)  # the engine's track
    return tracer


def test_search_latency_is_each_retrievals_time_from_its_query_to_its_top_k():
    got = search_latency(traced(), [outcome("a", 1.5), outcome("b", 1.0)])
    assert got is not None and got.count == 3
    assert got.mean_s == pytest.approx(0.3)
    assert got.p50_s == pytest.approx(0.2)
    assert got.p95_s == pytest.approx(0.56)  # numpy's linear interpolation, as every report
    assert got.queue_s == pytest.approx(0.34 / 3) and got.embed_s == pytest.approx(0.08 / 3)
    assert got.scan_s == pytest.approx(0.35 / 3)
    assert got.wait_s == pytest.approx(0.3 - 0.77 / 3)  # the rest: waiting between its steps


def test_spans_without_parts_give_the_latency_alone_and_no_spans_give_none():
    outcomes = [outcome("a", 1.5), outcome("b", 1.0)]
    whole = search_latency(traced(parts=False), outcomes)
    assert whole is not None and whole.mean_s == pytest.approx(0.3)
    assert (whole.queue_s, whole.embed_s, whole.scan_s, whole.wait_s) == (None,) * 4
    assert search_latency(Tracer(), outcomes) is None
    assert retrieval_share(traced(), outcomes) == pytest.approx(0.9 / 2.5)


def test_the_columns_are_flat_and_named_after_the_fields():
    latency = SearchLatency(3, 0.3, 0.2, 0.56, 0.04, 0.01, 0.1, 0.15)
    assert search_columns(latency) == {
        "search_count": 3, "search_mean_s": 0.3, "search_p50_s": 0.2, "search_p95_s": 0.56,
        "search_queue_s": 0.04, "search_embed_s": 0.01, "search_scan_s": 0.1,
        "search_wait_s": 0.15}
    assert set(search_columns(None).values()) == {None}
