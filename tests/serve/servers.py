"""A real uvicorn server on 127.0.0.1 (a free port) in a thread of the test process: the simulated
engine (labelled simulated) over real faiss (`tests/runtime/fakes.py`), so a test talks HTTP to
the same app `ragraph serve` runs, in seconds."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from ragraph.ir.graph import RAGraph
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.serve import ServeSettings, build_app
from ragraph.serve.state import ServerState

STARTUP_S = 60


class Served:
    def __init__(self, url: str, state: ServerState) -> None:
        self.url, self.state = url, state

    @property
    def hub(self):  # noqa: ANN201 - the running Hub
        return self.state.hub


@contextmanager
def serving(workflows: Mapping[str, RAGraph], config: RuntimeConfig,
            settings: ServeSettings | None = None, search=None) -> Iterator[Served]:  # noqa: ANN001
    import uvicorn

    from tests.runtime.fakes import random_search

    catalog = Catalog.compile(dict(workflows), config.passes)
    app = build_app(catalog, config, settings or ServeSettings(port=0),
                    search=search or random_search())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           timeout_graceful_shutdown=30))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_S
    while not server.started:  # uvicorn offers no event to wait on
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", app.state.server)
    finally:
        server.should_exit = True
        thread.join(timeout=60)
