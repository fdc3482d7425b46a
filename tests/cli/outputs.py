"""Reading the JSONL output of `ragraph run --input` while another process writes it."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def finished_rows(path: Path) -> list[dict]:
    """The lines a killed run finished; a last line without its newline was cut by the kill."""
    return [json.loads(line) for line in path.read_bytes().split(b"\n")[:-1]]


def complete_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    """Until `path` holds `n` finished lines (polling: another process writes it)."""
    deadline = time.monotonic() + timeout_s
    while complete_lines(path) < n:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before {n} lines")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not reach {n} lines within {timeout_s} s")
        time.sleep(0.02)
