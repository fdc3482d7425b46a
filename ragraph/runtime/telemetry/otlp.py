"""Exporting a run's spans over OTLP/HTTP (protobuf) to a collector: Jaeger, Arize Phoenix, an
OpenTelemetry Collector. The `otel` extra is imported here and only when `--otlp` is given."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.events import RunHooks, RunRecorder
from ragraph.runtime.telemetry.models import Models, models_of

log = logging.getLogger("ragraph.otlp")

INSTALL = "pip install 'ragraph[otel]'"
TRACES_PATH = "/v1/traces"  # OTLP/HTTP's path for spans, under the collector's base URL
# Spans wait here for the exporter's thread; past it the SDK drops them (a slow collector
# under a batch run of thousands of requests, each with a dozen spans).
QUEUE = 65536
# Closing waits this long for the collector to take the last spans: one that is down or hangs
# must not hold a run's or a server's exit (the SDK's retries of a dead one took ~30 s).
CLOSE_WAIT_S = 5.0


def require_otel() -> None:
    """A clear error, naming the extra to install, when OpenTelemetry's packages are missing."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as err:
        raise ConfigError("otlp", f"exporting spans needs the otel extra ({err.name} is "
                          f"missing): {INSTALL}") from err


def traces_url(endpoint: str) -> str:
    """The collector's URL for spans: a base URL (`http://localhost:4318`, what
    OTEL_EXPORTER_OTLP_ENDPOINT holds) gains `/v1/traces`; a URL with a path is taken as is."""
    return endpoint.rstrip("/") + TRACES_PATH if urlsplit(endpoint).path in ("", "/") else endpoint


@dataclass(frozen=True)
class Exported:
    """What the exporter did: spans the collector accepted, spans it could not deliver."""

    url: str
    sent: int
    failed: int
    # The collector had not taken the last spans when closing stopped waiting (they are lost).
    abandoned: bool = False

    def describe(self) -> str:
        lost = f", {self.failed} not delivered (the log says why)" if self.failed else ""
        gave_up = (f"; the collector did not take the last spans within {CLOSE_WAIT_S:g} s, "
                   "they were dropped" if self.abandoned else "")
        return f"spans: {self.sent} exported over OTLP to {self.url}{lost}{gave_up}"


class OtlpSpans:
    """A tracer provider of its own (the process's global one is left alone) whose spans go to
    `endpoint` in batches from the SDK's thread; `close()` sends what is left."""

    def __init__(self, endpoint: str) -> None:
        require_otel()
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.url = traces_url(endpoint)
        self._counted = _counting(OTLPSpanExporter(endpoint=self.url))
        # Not shut down at exit by the SDK: `close` does it, waiting at most CLOSE_WAIT_S.
        self.provider = TracerProvider(resource=Resource.create({"service.name": "ragraph"}),
                                       shutdown_on_exit=False)
        self.provider.add_span_processor(BatchSpanProcessor(self._counted, max_queue_size=QUEUE))

    def recorder(self, models: Models) -> RunRecorder:
        from ragraph.runtime.telemetry.spans import SpanRecorder

        return SpanRecorder(self.provider.get_tracer("ragraph"), models)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> Exported:
        """Flush and stop, waiting at most `wait_s` for the collector to take the last batch
        (the SDK's thread goes on trying meanwhile, a daemon); what was exported in all."""
        closing = threading.Thread(target=self.provider.shutdown, name="otlp close", daemon=True)
        closing.start()
        closing.join(wait_s)
        return Exported(self.url, self._counted.sent, self._counted.failed,
                        abandoned=closing.is_alive())


@asynccontextmanager
async def exporting(config: RuntimeConfig, hooks: RunHooks, llm,  # noqa: ANN001 - engines
                    search) -> AsyncIterator[None]:  # noqa: ANN001
    """Record the run's spans to `config.otlp` (nothing when None) while the block runs; then
    send what is left and log what was exported (spans the collector did not take: a warning)."""
    if config.otlp is None:
        yield
        return
    spans = OtlpSpans(config.otlp)
    hooks.recorder = spans.recorder(models_of(config, llm, search))
    try:
        yield
    finally:
        hooks.recorder = None
        exported = await asyncio.get_running_loop().run_in_executor(None, spans.close)
        (log.warning if exported.failed or exported.abandoned else log.info)(
            "%s", exported.describe())


def _counting(exporter):  # noqa: ANN001, ANN202 - an SDK SpanExporter, wrapped
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Counting(SpanExporter):
        """Counts what the wrapped exporter delivered, so a run can say it."""

        def __init__(self) -> None:
            self.sent = self.failed = 0
            self._lock = threading.Lock()

        def export(self, spans: Sequence) -> SpanExportResult:
            result = exporter.export(spans)
            with self._lock:
                if result == SpanExportResult.SUCCESS:
                    self.sent += len(spans)
                else:
                    self.failed += len(spans)
            return result

        def shutdown(self) -> None:
            exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return exporter.force_flush(timeout_millis)

    return Counting()
