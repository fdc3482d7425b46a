"""Counting the queries a run embeds: at the embedder, so every executor is counted alike
(ragraph's batches, the baselines' one query a call, the LangGraph app's retriever)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ragraph.runtime.search_service import Embedder, SearchService


@dataclass
class CountingEmbedder:
    """The run's query embedder, counting the texts it embeds."""

    inner: Embedder
    queries: int = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str], threads: int | None = None) -> np.ndarray:
        vectors = self.inner.embed(texts, threads=threads)
        self.queries += len(texts)
        return vectors

    def __getattr__(self, name: str):  # the rest of the embedder (its name, its model)
        if name == "inner":  # not set yet (a copy being made): no recursion through it
            raise AttributeError(name)
        return getattr(self.inner, name)


def counted(search: SearchService) -> SearchService:
    """`search` with its embedder counting queries (the same engine, store and lock)."""
    if isinstance(search.embedder, CountingEmbedder):
        return search
    return replace(search, embedder=CountingEmbedder(search.embedder))


def queries_embedded(search: SearchService) -> int:
    embedder = search.embedder
    return embedder.queries if isinstance(embedder, CountingEmbedder) else 0
