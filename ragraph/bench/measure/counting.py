"""Counting the queries a run embeds, and their tokens: at the embedder, so every executor is
counted alike (ragraph's batches, the baselines' one query a call, the LangGraph app's
retriever). A query's cost grows with its tokens (the bench's IRG queries, a question and the
last answer, cost several times a bare question), so a bound prices both
(`bench.measure.bounds`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ragraph.runtime.search_service import Embedder, SearchService


@dataclass
class CountingEmbedder:
    """The run's query embedder, counting the texts it embeds. Their tokens are counted when
    asked (`tokens`, read after a run's clock stops), not as they are embedded: that was a
    second tokenizer pass on the thread that embeds, which on the seeds preset is the
    bottleneck (measured: 1.0 s of tokenizing beside 95 s of embedding in one run)."""

    inner: Embedder
    queries: int = 0
    _tokens: int = 0
    _texts: list[str] = field(default_factory=list)  # embedded, tokens not counted yet

    @property
    def tokens(self) -> int:
        """The tokens of every text embedded so far (0 where the embedder cannot count them:
        no tokenizer here)."""
        texts, self._texts = self._texts, []  # embeds on other threads go to the new list
        if texts:
            self._tokens += count_tokens(self.inner, texts)
        return self._tokens

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str], threads: int | None = None) -> np.ndarray:
        vectors = self.inner.embed(texts, threads=threads)
        self.queries += len(texts)
        self._texts.extend(texts)
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


def count_tokens(embedder: Embedder, texts: Sequence[str]) -> int:
    """The tokens `embedder` computes for `texts` (0: it has no tokenizer of its own here)."""
    count = getattr(embedder, "count_tokens", None)
    return count(texts) if count is not None else 0


@dataclass(frozen=True)
class Embedded:
    queries: int = 0
    tokens: int = 0

    def __sub__(self, before: Embedded) -> Embedded:
        return Embedded(self.queries - before.queries, self.tokens - before.tokens)


def embedded(search: SearchService) -> Embedded:
    """What the run's embedder has embedded so far."""
    embedder = search.embedder
    if not isinstance(embedder, CountingEmbedder):
        return Embedded()
    return Embedded(embedder.queries, embedder.tokens)
