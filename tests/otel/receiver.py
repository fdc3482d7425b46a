"""A local OTLP/HTTP collector for the tests: a real loopback HTTP server that decodes what
`POST /v1/traces` carries (protobuf, `opentelemetry-proto`) and keeps the spans."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def value_of(any_value):  # noqa: ANN001, ANN201 - an OTLP AnyValue, as Python
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    return getattr(any_value, kind)


@dataclass
class Received:
    """Every span the collector was sent, with its resource's attributes."""

    spans: list = field(default_factory=list)
    resources: list[dict] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            for resource_spans in request.resource_spans:
                self.resources.append({a.key: value_of(a.value)
                                       for a in resource_spans.resource.attributes})
                for scope in resource_spans.scope_spans:
                    self.spans.extend(scope.spans)


def attributes(span) -> dict:  # noqa: ANN001 - an OTLP Span
    return {a.key: value_of(a.value) for a in span.attributes}


@contextmanager
def collector() -> Iterator[tuple[str, Received]]:
    """A collector on a free loopback port: its base URL and what it receives."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.paths.append(self.path)
            received.take(body)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args) -> None:  # noqa: ANN002 - quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
