"""An OpenAI-compatible /v1/embeddings server on loopback for the fast tests: real HTTP, a
bag-of-words embedding (texts that share words are near, so retrieval means something), and a
record of every request it answered."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


def bag_of_words(text: str, dim: int) -> list[float]:
    v = np.zeros(dim)
    for word in re.findall(r"[a-z]+", text.lower()):
        v[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little") % dim] += 1.0
    v[0] += 0.01  # an empty text still has a direction
    return (v / np.linalg.norm(v)).tolist()


@dataclass
class EmbedServer:
    model: str = "bag-of-words-64"
    dim: int = 64
    list_models: bool = True
    batches: list[list[str]] = field(default_factory=list)
    models_asked: list[str | None] = field(default_factory=list)
    url: str = ""


@contextmanager
def embed_server(**settings) -> Iterator[EmbedServer]:
    state = EmbedServer(**settings)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v1/models" and state.list_models:
                self._send(200, {"object": "list", "data": [{"id": state.model}]})
            else:
                self._send(404, {"error": "no such route"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
            state.batches.append(texts)
            state.models_asked.append(body.get("model"))
            data = [{"object": "embedding", "index": i, "embedding": bag_of_words(t, state.dim)}
                    for i, t in enumerate(texts)]
            self._send(200, {"object": "list", "data": data[::-1], "model": state.model})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
