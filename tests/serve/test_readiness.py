"""`/readiness` tells the truth about the engine: over an OpenAI-compatible upstream it is 503
(with the reason) while the upstream does not answer its health check and 200 once it does,
probed in the background; `/health` (the process and its scheduler) stays 200 throughout."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from ragraph.runtime.config import RuntimeConfig
from tests.llm.conftest import free_port
from tests.serve.conftest import graphs
from tests.serve.servers import serving, until


class _Models(BaseHTTPRequestHandler):
    """An upstream's health path (`/v1/models`) and nothing else."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        status = 200 if self.path == "/v1/models" else 404
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"object": "list", "data": []}')

    def log_message(self, *args: object) -> None:
        pass  # http.server writes every request to stderr


@contextmanager
def upstream(port: int) -> Iterator[None]:
    server = ThreadingHTTPServer(("127.0.0.1", port), _Models)
    thread = threading.Thread(target=server.serve_forever, name="upstream", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def readiness(url: str) -> httpx.Response:
    return httpx.get(url + "/readiness", timeout=10)


def test_readiness_follows_the_upstream_engine():
    port = free_port()  # nothing listens there yet
    config = RuntimeConfig.of(engine="openai", url=f"http://127.0.0.1:{port}", concurrency=4,
                              search_threads=1, nprobe=16)
    with serving(graphs(("oneshot",)), config) as served:
        until(lambda: readiness(served.url).status_code == 503, what="not ready: upstream down")
        reason = readiness(served.url).json()["reason"]
        assert "health check" in reason and "openai" in reason
        assert httpx.get(served.url + "/health").status_code == 200  # alive all the same
        # Still taken (a balancer may have no other server): the engine's fault, 502.
        asked = httpx.post(served.url + "/runs/wait", timeout=60, json={
            "workflow": "oneshot", "input": {"question": "Who designed the Eiffel Tower?"}})
        assert asked.status_code == 502, asked.text
        with upstream(port):
            until(lambda: readiness(served.url).status_code == 200, what="ready: upstream up")
        until(lambda: readiness(served.url).status_code == 503, what="not ready again")


def test_a_health_check_that_raises_is_not_ready_without_its_text():
    import asyncio

    from ragraph.serve.health import EngineHealth

    class Raising:
        name = "upstream"

        async def alive(self) -> bool:
            raise RuntimeError("secret internals at /srv/app.py:12")

    health = EngineHealth(Raising())  # type: ignore[arg-type]
    asyncio.run(health.probe())
    assert health.down == "engine upstream: its health check failed"
