"""`GET /metrics`: Prometheus text format, from a registry of the server's own (no global state).

Request counters and latency histograms are fed as requests finish; the engines' totals (tokens,
prefix-cache and cluster-cache hit rates) and the queue are read at scrape time, from the same
counters `ragraph run` summarizes."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ragraph.runtime.events import (
    RunEvent,
    SpeculationHeldBack,
    SpeculationSettled,
    SpeculationStarted,
)
from ragraph.runtime.hub import Hub, Ticket
from ragraph.runtime.outcome import Outcome

# Seconds: from 10 ms (a simulated GPU's short answer) to 10 minutes (a long CPU workflow).
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 150, 600)
EWMA = 0.1  # weight of the newest latency in the mean that sizes Retry-After


class ServerMetrics:
    """A HubListener that counts; `render()` is the scrape."""

    def __init__(self, hub: Hub) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("ragraph_requests", "Requests finished, by workflow and status: "
                                "ok; client_error (400: the request's own input, a question "
                                "too long for the model), upstream_error (502: the engine "
                                "failed), internal_error (500: the workflow or a bug); "
                                "client_gone (it left first), timeout (504), shutdown (cut "
                                "past --drain-timeout)", ("workflow", "status"),
                                registry=self.registry)
        self.rejected = Counter("ragraph_rejected_requests", "Requests that never ran, by HTTP "
                                "status (400, 401, 404, 408, 413, 415, 429, 503; 499: the "
                                "client left while sending its body)", ("code",),
                                registry=self.registry)
        self.responses = Counter("ragraph_http_responses", "HTTP responses, by status (a "
                                 "stream's is 200 whatever its last event)", ("code",),
                                 registry=self.registry)
        self.timed_out = Counter("ragraph_connections_timed_out", "Connections closed for "
                                 "not sending a request's headers within --header-timeout",
                                 registry=self.registry)
        self.latency = Histogram("ragraph_request_latency_seconds", "Answered requests: from "
                                 "arrival to the answer", ("workflow",), buckets=LATENCY_BUCKETS,
                                 registry=self.registry)
        self.ttft = Histogram("ragraph_time_to_first_token_seconds", "Answered requests: from "
                              "arrival to their first generated token", ("workflow",),
                              buckets=LATENCY_BUCKETS, registry=self.registry)
        self.speculation = Counter("ragraph_speculations", "Speculative generations at their "
                                   "commit point, by result (adopted, rolled_back)", ("result",),
                                   registry=self.registry)
        self.speculation_started = Counter("ragraph_speculations_started", "Speculative "
                                           "generations started on a partial top-k (each "
                                           "settles once: adopted or rolled_back)",
                                           registry=self.registry)
        self.speculation_held_back = Counter("ragraph_speculations_held_back", "Retrievals "
                                             "that started no speculation (and asked for no "
                                             "partial top-k) while the recent speculations "
                                             "were mostly rolled back", registry=self.registry)
        self.registry.register(_EngineCollector(hub))
        self.mean_latency_s: float | None = None

    def submitted(self, ticket: Ticket) -> None:
        pass

    def event(self, ticket: Ticket, event: RunEvent) -> None:
        if isinstance(event, SpeculationStarted):
            self.speculation_started.inc()
        elif isinstance(event, SpeculationSettled):
            self.speculation.labels("adopted" if event.adopted else "rolled_back").inc()
        elif isinstance(event, SpeculationHeldBack):
            self.speculation_held_back.inc()

    def finished(self, ticket: Ticket, outcome: Outcome) -> None:
        self.requests.labels(ticket.workflow, ticket.status or "internal_error").inc()
        if ticket.status != "ok":
            return
        latency = outcome.finished_at - ticket.submitted
        self.latency.labels(ticket.workflow).observe(latency)
        if outcome.first_token_at is not None:
            self.ttft.labels(ticket.workflow).observe(outcome.first_token_at - ticket.submitted)
        last = self.mean_latency_s
        self.mean_latency_s = latency if last is None else (1 - EWMA) * last + EWMA * latency

    def reject(self, status: int) -> None:
        self.rejected.labels(str(status)).inc()

    def responded(self, status: int) -> None:
        self.responses.labels(str(status)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _EngineCollector:
    """The engines' own totals and the queue, read when scraped."""

    def __init__(self, hub: Hub) -> None:
        self.hub, self.s = hub, hub.services

    def collect(self) -> Iterator[Metric]:
        n, in_flight = self.s.llm.counters(), self.hub.in_flight
        yield _gauge("ragraph_requests_in_flight", "Requests running or queued", in_flight)
        yield _gauge("ragraph_queue_depth", "Requests waiting for a scheduler slot",
                     max(in_flight - self.hub.config.scheduler.concurrency, 0))
        restarts = CounterMetricFamily("ragraph_scheduler_restarts", "Scheduler runs started "
                                       "again after one died (the requests it held failed)")
        restarts.add_metric([], self.hub.restarts)
        yield restarts
        yield _gauge("ragraph_engine_simulated", "1 when the LLM engine is the simulated one "
                     "(its text is synthetic, its timing a GPU model)", int(bool(n.simulated)))
        yield _gauge("ragraph_engine_streams_in_flight", "Generations the LLM engine is running",
                     getattr(self.s.llm, "in_flight", 0))
        for name, value, what in (("prompt", n.prompt_tokens, "Prompt tokens submitted"),
                                  ("cached", n.cached_tokens, "Prompt tokens reused from the "
                                   "prefix cache"),
                                  ("completion", n.completion_tokens, "Tokens generated")):
            counter = CounterMetricFamily(f"ragraph_engine_{name}_tokens", what)
            counter.add_metric([], value)
            yield counter
        yield _gauge("ragraph_prefix_cache_hit_rate", "Cached / prompt tokens since start",
                     n.cached_tokens / n.prompt_tokens if n.prompt_tokens else 0.0)
        cache = self.s.search.hot_cache
        if cache is not None:
            stats = cache.stats()
            yield _gauge("ragraph_cluster_cache_hit_rate", "Share of scanned vectors the "
                         "accelerator's hot-cluster cache served", stats.served_fraction)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)
