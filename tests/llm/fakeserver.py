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
    """`body_for(request_json) -> (status, body bytes)`; records the JSON bodies it received."""

    def __init__(self, body_for: Callable[[dict], tuple[int, bytes]]) -> None:
        self._body_for = body_for
        self.requests: list[dict] = []
        self._server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> FakeServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode().split("\r\n"):
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        body = json.loads(await reader.readexactly(length)) if length else {}
        self.requests.append(body)
        status, payload = self._body_for(body)
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: text/event-stream\r\n"
            f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode() + payload
        )
        await writer.drain()
        writer.close()
