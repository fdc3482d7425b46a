"""The server's own settings (the runtime's are a `RuntimeConfig`): built once from the command
line, validated here, with errors that name the flag."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ragraph.errors import ConfigError
from ragraph.runtime.checks import positive_int

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# The server's sizes and their bounds: connections are file descriptors (a process's limit is
# rarely above 65,536); a body past 64 MiB is no question (one is at most MAX_TEXT_CHARS); a
# queue of a million requests is hours of work at any rate ragraph serves.
LIMITS = {"max_body_bytes": 64 << 20, "max_queue": 1 << 20, "serve_replicas": 1024,
          "max_connections": 65536}


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"  # loopback: exposing the server is an explicit choice
    port: int = 8000
    api_key: str | None = None  # Bearer token every data endpoint requires when set
    # Host header values answered (`*.example.com` patterns); None: the default (`hosts`).
    allowed_hosts: tuple[str, ...] | None = None
    # Open connections uvicorn serves; past it, 503 at once (file descriptors are finite).
    max_connections: int = 512
    # A connection must send a request's headers within this (slowloris), its body within that.
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    # An idle connection is kept this long after a response, longer than clients' pools keep
    # one idle (httpx 5 s, aiohttp 15 s): a server that closes first races the client's next
    # request, which then gets a reset (uvicorn's own 5 s against httpx's 5 s did).
    keep_alive_s: float = 75.0
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
        for name, most in LIMITS.items():
            positive_int(flag(name), getattr(self, name), most)
        for name in ("request_timeout_s", "drain_timeout_s", "serve_cpus", "header_timeout_s",
                     "body_timeout_s", "keep_alive_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(flag(name), f"must be positive, got {getattr(self, name)}")
        if self.api_key is not None and not self.api_key.strip():
            raise ConfigError("--api-key", "must not be empty")
        for pattern in self.allowed_hosts or ():
            # Starlette's TrustedHostMiddleware asserts these; the user should read why.
            if not pattern or "*" in pattern[1:] or (pattern.startswith("*") and pattern != "*"
                                                      and not pattern.startswith("*.")):
                raise ConfigError("--allowed-hosts", f"{pattern!r}: a host name or address, "
                                  "'*.example.com' or '*'")
            if ":" in pattern and not _ipv6(pattern):
                raise ConfigError("--allowed-hosts", f"{pattern!r}: a host without its port")

    @property
    def hosts(self) -> tuple[str, ...]:
        """The Host header values answered. By default, on a loopback address: the loopback
        names and the bound host, so a web page cannot reach this server under a name of its
        own that resolves to 127.0.0.1 (DNS rebinding); bound beyond this machine, any name
        (what it is reached by is the network's business, as Jupyter does)."""
        if self.allowed_hosts is not None:
            names = self.allowed_hosts
        elif self.loopback:
            names = (*LOOPBACK_NAMES, self.host)
        else:
            names = ("*",)
        return tuple(dict.fromkeys(n for name in names for n in _spellings(name.lower())))

    @property
    def loopback(self) -> bool:
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return self.host == "localhost"


def flag(name: str) -> str:
    """The command-line flag of a settings field (`request_timeout_s` -> `--request-timeout`)."""
    return "--" + name.removesuffix("_s").replace("_", "-")


def _spellings(name: str) -> tuple[str, ...]:
    """An IPv6 address as a Host header carries it: in brackets (`[::1]:8000`); only IPv6
    addresses hold a colon here (a pattern has no port: validated above)."""
    bare = name.strip("[]")
    return (f"[{bare}]",) if ":" in bare else (name,)


def _ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.strip("[]")).version == 6
    except ValueError:  # not an address at all
        return False
