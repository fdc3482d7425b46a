"""llama.cpp's log lines from ragraph's own calls are dropped, the host's go where they went
(runtime/llm/llamacpp/logs.py), and the README's main job prints its answer without them."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real import need_module

ROOT = Path(__file__).resolve().parents[2]


def test_lines_on_a_quiet_thread_are_dropped_and_the_hosts_are_passed_on(capfd):
    need_module("llama_cpp")
    import llama_cpp

    from ragraph.runtime.llm.llamacpp import logs

    seen: list[bytes] = []

    @llama_cpp.llama_log_callback
    def host(level, text, user_data):  # the host application's own callback
        seen.append(text)

    llama_cpp.llama_log_set(host, ctypes.c_void_p(0))
    try:
        with logs.silent_here(install=True):
            logs._route(2, b"ragraph's decode\n", None)
        logs._route(2, b"the host's load\n", None)
        assert seen == [b"the host's load\n"]
        # The host sets its callback again later: the router goes back in front of it.
        llama_cpp.llama_log_set(host, ctypes.c_void_p(0))
        with logs.silent_here(install=True):
            logs._route(2, b"ragraph's free\n", None)
        assert seen == [b"the host's load\n"]
    finally:
        from llama_cpp import _logger

        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))


@pytest.mark.slow  # the real model and the default index
def test_the_main_job_prints_its_answer_without_llama_cpp_lines():
    """The README's second command: stdout is the answer, stderr ragraph's own two lines (the
    run's header and its GPU paths), none of llama.cpp's load or decode chatter."""
    need_module("llama_cpp")
    out = subprocess.run(
        [sys.executable, "-m", "ragraph.cli.main", "run", "workflows/hyde.rag",
         "--question", "Who designed the Eiffel Tower?"],
        capture_output=True, text=True, cwd=ROOT, timeout=600, env=dict(os.environ))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "eiffel" in out.stdout.lower()
    lines = out.stderr.splitlines()
    assert lines and lines[0].startswith("workflow hyde"), out.stderr[-3000:]
    chatter = [line for line in lines[1:] if line.strip() and not line.startswith("GPU paths:")]
    assert chatter == [], out.stderr[-3000:]
