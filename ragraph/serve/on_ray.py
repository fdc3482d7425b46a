"""`ragraph serve --ray`: the server of `app.py` as Ray Serve replicas behind Serve's HTTP proxies.

Each replica runs what `ragraph serve` runs in its one process: the Starlette app, its hub and
one wavefront scheduler, and its engines (with `--replicas`, a router over the same servers as
every other replica); the requests Serve routes to a replica batch together in its scheduler.
The index's lists are on shard actors the command started once; every replica searches them.
Serve runs the app's lifespan (engines opened at startup, requests drained at shutdown) and
passes requests, streamed responses and disconnects through its proxies, so the routes, their
errors and their streams are those of `ragraph serve`. Metrics and the page are per replica.

This module imports Ray Serve: import it only for `--ray` (`pip install "ragraph[ray]"`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ray import serve
from starlette.applications import Starlette

from ragraph.errors import RagraphError
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.search_service import SearchService
from ragraph.serve.app import build_app
from ragraph.serve.settings import ServeSettings

APP = "ragraph"
# Serve holds back requests beyond a replica's `max_ongoing_requests`; ragraph's own admission
# decides instead (429 past --max-queue), so Serve lets through that many and room for probes.
PROBES = 16
REPLICA_LOGS = "/tmp/ray/session_latest/logs/serve/"


@serve.ingress()
class Ingress:
    """One replica: its search side opened first (the embedder loads), then the app, whose
    lifespan Serve runs (the engines open, the scheduler starts)."""

    async def __init__(self, catalog: Catalog, config: RuntimeConfig, settings: ServeSettings,
                       open_search: Callable[[], SearchService]) -> None:
        self._catalog, self._config, self._settings = catalog, config, settings
        loop = asyncio.get_running_loop()
        self._search = await loop.run_in_executor(None, open_search)

    def __serve_build_asgi_app__(self) -> Starlette:
        return build_app(self._catalog, self._config, self._settings, self._search)


def start(settings: ServeSettings) -> None:
    """Serve on the cluster, its proxies on `settings`' host and port (a cluster already serving
    keeps its own: Ray warns)."""
    logging.getLogger("ray.serve").setLevel(logging.WARNING)  # its progress, said at INFO
    serve.start(http_options={"host": settings.host, "port": settings.port})


def deploy(catalog: Catalog, config: RuntimeConfig, settings: ServeSettings,
           open_search: Callable[[], SearchService]) -> None:
    """`settings.serve_replicas` replicas of the server; returns once every one is up.
    `open_search` runs in each replica (it pickles)."""
    ingress = serve.deployment(
        Ingress, name="ragraph-server", num_replicas=settings.serve_replicas,
        ray_actor_options={"num_cpus": settings.serve_cpus},
        max_ongoing_requests=config.scheduler.concurrency + settings.max_queue + PROBES,
        graceful_shutdown_timeout_s=settings.drain_timeout_s)
    try:
        serve.run(ingress.bind(catalog, config, settings, open_search), name=APP,
                  route_prefix="/")
    except RuntimeError as err:  # Serve's summary; why the replicas failed is in its status
        raise RagraphError(f"error: the Ray Serve replicas did not start: {err}"
                           f"{_why_not_running()}\n(the replicas' logs: {REPLICA_LOGS} on their nodes, "
                           "Ray's default place)"
                           ) from err


def _why_not_running() -> str:
    """Each deployment's message: what Serve saw (its first line) and the replica's error (the
    last line of its traceback)."""
    app = serve.status().applications.get(APP)
    lines = [d.message.strip().splitlines() for d in (app.deployments.values() if app else ())]
    return "".join(f"\n{m[0]}\n{m[-1]}" for m in lines if m)


def undeploy() -> None:
    """Stop taking requests, let the replicas finish those in flight (up to --drain-timeout),
    stop them; then Serve itself when no other application runs on it."""
    serve.delete(APP)
    if not serve.status().applications:
        serve.shutdown()
