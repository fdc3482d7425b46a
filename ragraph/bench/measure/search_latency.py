"""What the requests' retrievals took, from the per-request trace spans every executor records
(`retrieve <node>`, from the query ready to its top-k): their share of the requests' time, and
the search latency itself, HedraRAG's measure of its sub-stages (its Fig. 16).

ragraph's search side says on each span where the time went (`queue_s`: waiting for the search
thread before its query's embedding batch, behind the step or batch running; `embed_s`: that
batch's embedding and probing; `scan_s`: the search steps that scanned its clusters); the rest
is waiting between its steps, for other retrievals' steps and batches. The baselines' spans
carry no parts: their search is one call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

from ragraph.runtime.outcome import Outcome, percentile
from ragraph.runtime.trace import Tracer, TraceSpan

# The parts of a retrieval's time its span says, in seconds (ragraph's search side).
PARTS = ("queue_s", "embed_s", "scan_s")


@dataclass(frozen=True)
class SearchLatency:
    """A run's retrievals, from each one's query ready to its top-k (seconds)."""

    count: int
    mean_s: float
    p50_s: float
    p95_s: float
    # Means of the parts (None where a span does not say them): queueing for the search thread,
    # embedding, scanning in the steps that searched it, and the rest (waiting between steps).
    queue_s: float | None = None
    embed_s: float | None = None
    scan_s: float | None = None
    wait_s: float | None = None


def retrieval_spans(tracer: Tracer, outcomes: Sequence[Outcome]) -> list[TraceSpan]:
    """The retrievals of `outcomes`' requests (speculative ones, named `warm`, left out)."""
    rids = {o.rid for o in outcomes}
    return [s for s in tracer.spans() if s.track in rids and s.name.startswith("retrieve")]


def retrieval_share(tracer: Tracer, outcomes: Sequence[Outcome]) -> float | None:
    """Time the requests spent in retrieval nodes (queueing for the search engine included) over
    their whole time."""
    total = sum(o.latency for o in outcomes)
    if total <= 0:
        return None
    spans = retrieval_spans(tracer, outcomes)
    return sum(s.end - s.start for s in spans) / total if spans else None


def search_latency(tracer: Tracer, outcomes: Sequence[Outcome]) -> SearchLatency | None:
    """The search latency of the requests' retrievals (None: no retrieval traced)."""
    spans = retrieval_spans(tracer, outcomes)
    if not spans:
        return None
    took = [s.end - s.start for s in spans]
    latency = SearchLatency(len(took), _mean(took), percentile(took, 50, 0.0),
                            percentile(took, 95, 0.0))
    if not all(part in s.args for s in spans for part in PARTS):
        return latency
    queue, embed, scan = (_mean([s.args[part] for s in spans]) for part in PARTS)
    return replace(latency, queue_s=queue, embed_s=embed, scan_s=scan,
                   wait_s=max(latency.mean_s - queue - embed - scan, 0.0))


def search_columns(latency: SearchLatency | None) -> dict[str, float | int | None]:
    """Flat CSV and JSON columns (`search_mean_s`, ...): None where nothing was traced."""
    return {f"search_{f.name}": None if latency is None else getattr(latency, f.name)
            for f in fields(SearchLatency)}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
