"""`/metrics` counts speculation as `ragraph run` reports it: started, then adopted or rolled
back, and held back by the backoff (the counters the run summary and the bench's CSV also
show)."""

from __future__ import annotations

from types import SimpleNamespace

from ragraph.runtime.events import SpeculationHeldBack, SpeculationSettled, SpeculationStarted
from ragraph.serve.metrics import ServerMetrics


def samples(counter) -> dict[tuple[str, tuple], float]:  # noqa: ANN001 - a prometheus Counter
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in counter.collect() for s in family.samples}


def test_metrics_count_speculations_started_adopted_and_rolled_back():
    metrics = ServerMetrics(SimpleNamespace(services=None))  # type: ignore[arg-type]
    ticket = SimpleNamespace()
    for event in (SpeculationStarted("r1", "answer"), SpeculationStarted("r1", "answer"),
                  SpeculationSettled("r1", "answer", adopted=False),
                  SpeculationSettled("r1", "answer", adopted=True)):
        metrics.event(ticket, event)  # type: ignore[arg-type]
    assert samples(metrics.speculation_started)[("ragraph_speculations_started_total", ())] == 2
    settled = samples(metrics.speculation)
    assert settled[("ragraph_speculations_total", (("result", "adopted"),))] == 1
    assert settled[("ragraph_speculations_total", (("result", "rolled_back"),))] == 1


def test_metrics_count_the_speculations_held_back():
    metrics = ServerMetrics(SimpleNamespace(services=None))  # type: ignore[arg-type]
    for _ in range(3):
        metrics.event(SimpleNamespace(), SpeculationHeldBack("r1", "answer"))  # type: ignore[arg-type]
    held = samples(metrics.speculation_held_back)
    assert held[("ragraph_speculations_held_back_total", ())] == 3
