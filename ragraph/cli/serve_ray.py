"""`ragraph serve --ray ADDRESS`: the index's lists on shard actors started here, the server as
Ray Serve replicas that share them (`serve/on_ray.py`), until SIGINT or SIGTERM.

This process owns the shards: stopping it deletes the Serve application (its replicas finish the
requests in flight first) and then the shards."""

from __future__ import annotations

import signal
import threading
from functools import partial

from rich.console import Console

from ragraph.cli.cmd_serve import announce, describe
from ragraph.cli.run_single import with_index
from ragraph.errors import ConfigError
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.serve.settings import ServeSettings


def serve_on_ray(catalog: Catalog, config: RuntimeConfig, settings: ServeSettings,
                 err: Console) -> int:
    from ragraph.runtime.app import open_attached_search, start_sharded_index

    on_ray = _ray_serve()
    err.print(describe(catalog, config, settings))
    index = with_index(config, err, start_sharded_index)  # joins the cluster
    err.print(f"[dim]index on {config.scale.shards} Ray shards at {config.scale.ray} · "
              f"{settings.serve_replicas} Ray Serve replicas, {settings.serve_cpus:g} CPUs each"
              "[/dim]")
    interrupt_on_stop_signals()
    try:
        on_ray.start(settings)
        try:
            on_ray.deploy(catalog, config, settings, partial(open_attached_search, index,
                                                             config))
            announce(settings, err, f" through Ray Serve at {config.scale.ray}")
            threading.Event().wait()  # until SIGINT or SIGTERM
        except KeyboardInterrupt:
            err.print("stopping: the requests in flight finish first")
        finally:
            on_ray.undeploy()
    finally:
        index.stop()
    return 0


def _ray_serve():
    """`serve/on_ray.py`, or a ConfigError naming the extra that installs Ray Serve."""
    from ragraph.runtime.distributed.ray_env import EXTRA, require_ray

    require_ray("--ray")
    try:
        from ragraph.serve import on_ray
    except ImportError as err:
        raise ConfigError("--ray", f"serving on Ray needs Ray Serve ({err.name} is missing); "
                          f"install the extra: {EXTRA}") from err
    return on_ray


def interrupt_on_stop_signals() -> None:
    """SIGTERM as SIGINT: a KeyboardInterrupt in whatever the command is doing, deploying or
    waiting, so that it cleans up (a second one cuts the drain short). Set once connected: Ray's
    driver replaces the SIGTERM handler when it connects."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.default_int_handler)
