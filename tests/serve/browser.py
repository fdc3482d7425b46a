"""A real headless Chromium driven over the DevTools protocol (a websocket): open a page, wait for
what the page itself signals (a promise in the page, never a sleep), read values, screenshot."""

from __future__ import annotations

import base64
import itertools
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tests.processes import stop

LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    def __init__(self, socket) -> None:  # noqa: ANN001 - a websockets sync connection
        self.socket, self._ids = socket, itertools.count(1)

    def call(self, method: str, timeout_s: float = 60, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events on the way are skipped)."""
        mid = next(self._ids)
        self.socket.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=timeout_s))
            if message.get("id") == mid:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def wait_for(self, event: str, timeout_s: float = 60) -> dict[str, Any]:
        while True:
            message = json.loads(self.socket.recv(timeout=timeout_s))
            if message.get("method") == event:
                return message.get("params", {})

    def open(self, url: str) -> None:
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str, timeout_s: float = 60) -> Any:
        """The value of `expression`; a promise is awaited (in the page, up to `timeout_s`)."""
        result = self.call("Runtime.evaluate", timeout_s=timeout_s, expression=expression,
                           awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"in the page: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])


def when(selector: str, holds: str) -> str:
    """A page expression: a promise of the value of `holds` (JS over the element `el`) once it
    is truthy, re-checked whenever the element or anything in it changes."""
    return f"""new Promise(resolve => {{
      const el = document.querySelector({json.dumps(selector)});
      const check = () => {{ const v = ({holds}); if (v) {{ resolve(v); return true; }} }};
      if (check()) return;
      new MutationObserver(check).observe(el, {{attributes: true, childList: true,
                                                characterData: true, subtree: true}});
    }})"""


@contextmanager
def headless(width: int = 1400, height: int = 1000) -> Iterator[Page]:
    from websockets.sync.client import connect

    binary = chromium()
    if binary is None:
        raise RuntimeError("chromium is not on PATH")
    profile = tempfile.mkdtemp(prefix="ragraph-chromium-")
    proc = subprocess.Popen(
        # As root (CI) Chromium needs --no-sandbox; containers give /dev/shm little room.
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run",
         "--remote-debugging-port=0", f"--user-data-dir={profile}",
         f"--window-size={width},{height}", "about:blank"],
        # Its own process group: the renderer and utility processes outlive the browser by a
        # moment and keep writing into the profile (CI once failed removing it), so the whole
        # group is stopped before the profile goes. Its scratch files go inside the profile too.
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "TMPDIR": profile})
    try:
        endpoint = _endpoint(proc)
        port = re.search(r":(\d+)/", endpoint).group(1)  # type: ignore[union-attr]
        targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        target = next(t for t in targets if t["type"] == "page")
        with connect(target["webSocketDebuggerUrl"], max_size=None) as socket:
            yield Page(socket)
    finally:
        stop(proc)
        _stop_group(proc.pid)
        _remove(profile)


def _stop_group(pgid: int, timeout_s: float = 10) -> None:
    """SIGKILL whatever is left of the browser's process group and wait until it is gone."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _remove(path: str, timeout_s: float = 10) -> None:
    """Remove the profile, retrying while a straggler finishes its last write."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _endpoint(proc: subprocess.Popen, timeout_s: float = 60) -> str:
    """The websocket Chromium prints once it listens; its stderr is drained from then on (a
    full pipe would stall the browser)."""
    found: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if (match := LISTENING.search(line)) is not None:
                found.put(match.group(1))
        found.put("")

    threading.Thread(target=read, name="chromium-stderr", daemon=True).start()
    endpoint = found.get(timeout=timeout_s)
    if not endpoint:
        raise RuntimeError(f"chromium exited ({proc.wait()}) without a DevTools endpoint")
    return endpoint
