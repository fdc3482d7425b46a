"""Ray as an optional extra: a clear error without it, and connecting to a cluster.

Ray itself is the cluster manager, the RPC layer and the scheduler of actors; ragraph only asks
it for actors (`ray.remote`), restarts (`max_restarts`) and results (`ray.get`).
"""

from __future__ import annotations

import logging
import socket

from ragraph.errors import ConfigError

EXTRA = 'pip install "ragraph[ray]"'


def require_ray(flag: str = "--ray"):
    """The `ray` module, or a ConfigError naming the extra that installs it."""
    try:
        import ray
    except ImportError as err:
        raise ConfigError(flag, f"needs Ray, which is not installed; install the extra: {EXTRA}"
                          ) from err
    return ray


def connect(address: str):
    """Join the cluster at `address` ("host:port" of a head started with `ray start --head`,
    "auto" for the one this machine runs, "local" to start one in this process); a no-op once
    connected (tests start their own)."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    if address not in ("auto", "local"):
        _check_reachable(address)
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False,
                 **({"include_dashboard": False} if address == "local" else {}))
    except (ConnectionError, ValueError, RuntimeError) as err:
        raise ConfigError("--ray", f"cannot join the Ray cluster at {address}: {err}") from err
    return ray


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds on a wrong address: Ray's own client retries for minutes."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError("--ray", f"expected HOST:PORT or auto, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise ConfigError("--ray", f"no Ray head answers at {address} ({err}); start one with"
                          " `ray start --head` there") from err
