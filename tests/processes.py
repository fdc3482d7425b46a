"""Child processes the tests start (servers, browsers): stopped politely, then for sure."""

from __future__ import annotations

import subprocess


def stop(proc: subprocess.Popen, timeout_s: float = 10) -> int:
    """SIGTERM, then SIGKILL if it has not exited within `timeout_s`; its exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()
