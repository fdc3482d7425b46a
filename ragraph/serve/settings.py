"""The server's own settings (the runtime's are a `RuntimeConfig`): built once from the command
line, validated here, with errors that name the flag."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ragraph.errors import ConfigError


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"  # loopback: exposing the server is an explicit choice
    port: int = 8000
    api_key: str | None = None  # Bearer token every data endpoint requires when set
    max_body_bytes: int = 1 << 20
    # Requests admitted beyond the scheduler's concurrency before 429 (SGLang's gateway queue).
    max_queue: int = 256
    request_timeout_s: float = 300.0
    # On shutdown, in-flight requests get this long to finish (uvicorn's graceful timeout).
    drain_timeout_s: float = 60.0
    # With --ray: Ray Serve replicas of the server (each its own scheduler and engines), and
    # the Ray CPUs each one holds.
    serve_replicas: int = 1
    serve_cpus: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError("--port", f"must be in 0..65535, got {self.port}")
        for name in ("max_body_bytes", "max_queue", "serve_replicas"):
            if getattr(self, name) < 1:
                raise ConfigError(flag(name), f"must be at least 1, got {getattr(self, name)}")
        for name in ("request_timeout_s", "drain_timeout_s", "serve_cpus"):
            if not getattr(self, name) > 0:
                raise ConfigError(flag(name), f"must be positive, got {getattr(self, name)}")
        if self.api_key is not None and not self.api_key.strip():
            raise ConfigError("--api-key", "must not be empty")

    @property
    def loopback(self) -> bool:
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return self.host == "localhost"


def flag(name: str) -> str:
    """The command-line flag of a settings field (`request_timeout_s` -> `--request-timeout`)."""
    return "--" + name.removesuffix("_s").replace("_", "-")
