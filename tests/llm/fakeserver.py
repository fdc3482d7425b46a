"""A tiny HTTP server on loopback that answers every request with a fixed streamed body.

For the HTTP engines' tests: real sockets and real httpx, canned server behaviour (SSE, garbage,
error statuses) without a model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable


def sse(*objs: object, done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(o)}\n\n" for o in objs]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


class FakeServer:
    """`body_for(request_json) -> (status, body bytes)`; records the JSON bodies it received and
    the paths they were posted to (`paths`). A GET is answered from `gets` (path -> JSON), else
    an empty model list for `/v1/models` and 404 otherwise, at once and unrecorded (the engine reads `/props` and `/v1/models` when it starts).
    `hold`: answers wait until it is set (a server that hangs). `stop()` closes the listening
    socket (connections are refused, as from a server that went down); `start()` listens on the
    same port again."""

    def __init__(self, body_for: Callable[[dict], tuple[int, bytes]],
                 hold: asyncio.Event | None = None, gets: dict[str, object] | None = None) -> None:
        self._body_for = body_for
        self.hold = hold
        self.gets = gets or {}
        self.requests: list[dict] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._server: asyncio.Server | None = None
        self.port = 0
        self.url = ""

    async def __aenter__(self) -> FakeServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, path = head.decode().split(" ", 2)[:2]
        length = 0
        headers = {}
        for line in head.decode().split("\r\n")[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        if method == "GET":
            await self._answer(writer, *self._get(path))
            return
        body = json.loads(await reader.readexactly(length)) if length else {}
        self.requests.append(body)
        self.paths.append(path)
        self.headers.append(headers)
        if self.hold is not None:
            await self.hold.wait()
        await self._answer(writer, *self._body_for(body))

    def _get(self, path: str) -> tuple[int, bytes]:
        if path in self.gets:
            return 200, json.dumps(self.gets[path]).encode()
        if path == "/v1/models":  # the health check; a model list that states no context
            return 200, json.dumps({"object": "list", "data": []}).encode()
        return 404, b"{}"

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, status: int, payload: bytes) -> None:
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: text/event-stream\r\n"
            f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode() + payload
        )
        await writer.drain()
        writer.close()
