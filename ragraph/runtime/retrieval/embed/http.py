"""Embeddings from an OpenAI-compatible `/v1/embeddings` server (vLLM, TEI, llama-server
`--embedding`, ...): `--embedder-url`.

It is used exactly where the local embedder is: the wavefront hands it the queries of many
requests in one call, and each call is one request to the server per `batch_size` texts (TEI
refuses more than 32 inputs a request by default: `--max-client-batch-size`). The index's prompts
are put in front of the texts here, since these servers embed the text they are given.

What is promised: the server's model and dimension are checked against the index before the first
query (one line naming both sides), a server that is down or answers nonsense is an error naming
the URL, and vectors are L2-normalized here (in float64, row by row, so that step never depends on
the batch). What is not: whether the server's own vector for a text depends on what it batched
the text with is the server's business (a GPU server in float16 usually does; for exact answers
across concurrency use a local embedder, whose queries are batch-invariant: embedder.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ragraph.errors import ConfigError, EngineError, SearchIndexError
from ragraph.runtime.retrieval.embed.spec import EmbedderSpec

PROBE_TEXT = "ragraph embedder check"


@dataclass(frozen=True)
class HttpEmbedderConfig:
    url: str  # the server's base URL, with or without the trailing /v1
    model: str | None = None  # None: the first model the server lists (/v1/models)
    role: str = "query"
    query_prompt: str = ""
    passage_prompt: str = ""
    batch_size: int = 32
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError("embedder_url", f"must be an http(s):// URL, got {self.url!r}")
        if self.role not in ("query", "passage"):
            raise ConfigError("role", f"must be query or passage, got {self.role!r}")
        if self.batch_size < 1:
            raise ConfigError("batch_size", f"must be at least 1, got {self.batch_size}")

    @property
    def base(self) -> str:
        url = self.url.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"


class HttpEmbedder:
    """Text -> L2-normalized float32 vectors from the server; `spec` is what an index built
    with it records (the model the server names, its dimension, the prompts)."""

    def __init__(self, config: HttpEmbedderConfig) -> None:
        import httpx

        self._config = config
        self._client = httpx.Client(timeout=config.timeout_s)
        self._prompt = config.query_prompt if config.role == "query" else config.passage_prompt
        self._model = config.model or self._listed_model()
        probe, answered = self._post([PROBE_TEXT], opening=True)
        self._model = self._model or answered
        if not self._model:
            raise SearchIndexError(f"embeddings server {config.url} names no model; give it "
                                   "with --embedder-model")
        self.spec = EmbedderSpec(self._model, int(probe.shape[1]), config.query_prompt,
                                 config.passage_prompt, source="openai-http")
        self.name = self.spec.name
        self.dim = self.spec.dim

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None,
              threads: int | None = None) -> np.ndarray:
        """`threads` is accepted for the embedder protocol; the server has its own."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        size = self._config.batch_size
        for start in range(0, len(texts), size):
            chunk = [self._prompt + t for t in texts[start:start + size]]
            vectors, _ = self._post(chunk)
            if vectors.shape[1] != self.dim:
                raise EngineError(f"embeddings server {self._config.url} answered "
                                  f"{vectors.shape[1]}-dimensional vectors, {self.dim} before")
            out[start:start + len(chunk)] = vectors
            if progress is not None:
                progress(len(chunk))
        return out

    def close(self) -> None:
        self._client.close()

    def _listed_model(self) -> str | None:
        import httpx

        try:
            response = self._client.get(self._config.base + "/models")
        except httpx.HTTPError as err:
            raise self._unreachable(err) from err
        if response.status_code != 200:
            return None  # not every server lists models (the embeddings answer names it)
        data = _json(response).get("data")
        if isinstance(data, list) and data and isinstance(data[0], dict):
            first = data[0].get("id")
            return first if isinstance(first, str) and first else None
        return None

    def _post(self, texts: list[str], opening: bool = False) -> tuple[np.ndarray, str | None]:
        import httpx

        body: dict = {"input": texts, "encoding_format": "float"}
        if self._model:
            body["model"] = self._model
        fail = SearchIndexError if opening else EngineError
        try:
            response = self._client.post(self._config.base + "/embeddings", json=body)
        except httpx.HTTPError as err:
            raise (self._unreachable(err) if opening else EngineError(
                f"embeddings server {self._config.url}: {type(err).__name__}: {err}")) from err
        if response.status_code != 200:
            raise fail(f"embeddings server {self._config.url} answered HTTP "
                       f"{response.status_code}: {response.text[:200]}")
        payload = _json(response)
        try:
            return _vectors(payload, len(texts)), payload.get("model")
        except (KeyError, TypeError, ValueError) as err:
            raise fail(f"embeddings server {self._config.url}: not an embeddings answer "
                       f"({err})") from err

    def _unreachable(self, err: Exception) -> SearchIndexError:
        return SearchIndexError(
            f"embeddings server {self._config.url} cannot be reached ({type(err).__name__}: "
            f"{err}); is it running? (--embedder-url)")


def _json(response) -> dict:
    try:
        payload = response.json()
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _vectors(payload: dict, n: int) -> np.ndarray:
    """The answer's vectors in input order, L2-normalized row by row in float64."""
    data = sorted(payload["data"], key=lambda item: int(item["index"]))
    if len(data) != n:
        raise ValueError(f"{len(data)} embeddings for {n} inputs")
    rows = np.asarray([item["embedding"] for item in data], dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] == 0:
        raise ValueError("embeddings must be equal-length lists of numbers")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms > 0, norms, 1.0)).astype(np.float32)
