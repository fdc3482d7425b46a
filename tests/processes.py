"""Child processes the tests start (servers, browsers): stopped politely, then for sure; and
`ragraph serve` as a user starts it, in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stop(proc: subprocess.Popen, timeout_s: float = 10) -> int:
    """SIGTERM, then SIGKILL if it has not exited within `timeout_s`; its exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def ragraph(*argv: str) -> list[str]:
    """The command line of `ragraph ARGV` in this interpreter."""
    return [sys.executable, "-m", "ragraph.cli.main", *argv]


@contextmanager
def serve(*argv: str, startup_s: float = 900) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """`ragraph serve ARGV` on a free loopback port until /readiness answers 200 (a first use
    builds the default index): its URL, process and log file. SIGTERM at the end."""
    import pytest

    from tests.llm.conftest import free_port

    port = free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"ragraph-serve-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(ragraph("serve", *argv, "--port", str(port)), stdout=out,
                                stderr=subprocess.STDOUT, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_s
        while not _ready(url):
            if proc.poll() is not None:
                pytest.fail(f"ragraph serve exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail("ragraph serve did not become ready")
            time.sleep(0.5)  # polling another process's socket: it offers no event
        yield url, proc, log
    finally:
        stop(proc, timeout_s=120)


def _ready(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url + "/readiness", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
