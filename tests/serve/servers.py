"""A real uvicorn server on 127.0.0.1 (a free port) in a thread of the test process: the simulated
engine (labelled simulated) over real faiss (`tests/runtime/fakes.py`), so a test talks HTTP to
the same app `ragraph serve` runs, in seconds."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ragraph.api.load import compile_catalog
from ragraph.ir.graph import RAGraph
from ragraph.runtime.config import RuntimeConfig
from ragraph.serve import ServeSettings, build_app
from ragraph.serve.listener import make_server
from ragraph.serve.state import ServerState

STARTUP_S = 60


class Served:
    def __init__(self, url: str, state: ServerState, server) -> None:  # noqa: ANN001
        self.url, self.state, self._server = url, state, server

    @property
    def uvicorn(self):  # noqa: ANN201 - the uvicorn Server (its connections)
        return self._server

    @property
    def hub(self):  # noqa: ANN201 - the running Hub
        return self.state.hub

    @property
    def llm(self):  # noqa: ANN201 - the server's engine
        return self.state.hub.services.llm

    def stop(self) -> None:
        """What SIGTERM does: stop accepting, let requests in flight finish, shut down."""
        self._server.should_exit = True

    def idle(self) -> bool:
        """No request in the server and no generation left in the engine."""
        return self.hub.in_flight == 0 and self.llm.in_flight == 0


def sse_events(response) -> list[tuple[str, dict]]:  # noqa: ANN001 - an httpx stream
    """The (event, data) pairs of a server-sent event stream."""
    import json

    out, event, data = [], "message", []
    for line in response.iter_lines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            out.append((event, json.loads("\n".join(data))))
            event, data = "message", []
    return out


@contextmanager
def captured_logs(names: tuple[str, ...] = ("ragraph", "uvicorn", "asyncio")
                  ) -> Iterator[list[logging.LogRecord]]:
    """The records the server logs meanwhile, from its thread too (uvicorn's loggers do not
    propagate to the root, where pytest's caplog listens)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler, loggers = Keep(logging.DEBUG), [logging.getLogger(n) for n in names]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield records
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def metric(url: str, name: str, headers: dict[str, str] | None = None, **labels: str) -> float:
    """One sample of the server's /metrics (0 when absent)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", headers=headers, timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


def until(condition: Callable[[], bool], timeout_s: float = 30, what: str = "condition") -> None:
    """Wait for a state the server reaches on its own thread (polling: it offers no event)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s")
        time.sleep(0.02)


def slow_profile(path: Path, step_ms: float = 400.0) -> Path:
    """A GPU profile (the `ragraph calibrate` format) in which every prefill and decode step
    takes `step_ms`: a request stays in flight long enough to be cancelled, queued or timed out
    whatever the machine's speed."""
    import json

    from ragraph.runtime.llm.sim.profile import default_profile

    shape = {k: v for k, v in default_profile().shape.to_json().items() if k != "name"}
    path.write_text(json.dumps({
        "format": "ragraph-gpu-profile/1", "model": "Llama-3.1-8B", "gpu": "slow test GPU",
        "dtype": "bfloat16", "shape": shape,
        "prefill": [{"tokens": 1, "ms": step_ms}, {"tokens": 10_000_000, "ms": step_ms}],
        "decode": [{"batch": b, "context": c, "ms": step_ms}
                   for b in (1, 100_000) for c in (0, 10_000_000)]}), encoding="utf-8")
    return path


@contextmanager
def serving(workflows: Mapping[str, RAGraph], config: RuntimeConfig,
            settings: ServeSettings | None = None, search=None,  # noqa: ANN001
            adapt=None) -> Iterator[Served]:  # noqa: ANN001 - serve --adapt's AdaptPlan
    from tests.runtime.fakes import random_search

    catalog = compile_catalog(dict(workflows), config.scheduler.passes)
    settings = settings or ServeSettings(port=0)
    app = build_app(catalog, config, settings, search=search or random_search(), adapt=adapt)
    with serving_app(app, settings) as served:
        yield served


@contextmanager
def serving_app(app, settings: ServeSettings) -> Iterator[Served]:  # noqa: ANN001 - build_app's
    """`app` (what `build_app` returned) served on a free loopback port until the block ends."""
    # The server `ragraph serve` runs (its protocol, limits and shutdown), on a free port.
    server = make_server(app, settings, host="127.0.0.1", port=0, log_level="warning")
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_S
    while not server.started:  # uvicorn offers no event to wait on
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", app.state.server, server)
    finally:
        server.should_exit = True
        thread.join(timeout=60)
