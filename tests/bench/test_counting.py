"""The bench's count of what a run embedded (`bench.measure.counting`): queries as they are
embedded, their tokens only when the run's totals are read."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragraph.bench.measure.counting import CountingEmbedder, Embedded, counted, embedded
from tests.runtime.fakes import HashEmbedder


class Tokenizing(HashEmbedder):
    """A fake embedder with a tokenizer: a token a word, and a log of what it tokenized."""

    def __init__(self) -> None:
        super().__init__()
        self.tokenized: list[list[str]] = []

    def count_tokens(self, texts: Sequence[str]) -> int:
        self.tokenized.append(list(texts))
        return sum(len(t.split()) for t in texts)


def test_tokens_are_counted_when_read_not_on_the_embedding_thread() -> None:
    # Tokenizing as it embedded was a second tokenizer pass on the search thread, the seeds
    # preset's bottleneck.
    inner = Tokenizing()
    embedder = CountingEmbedder(inner)
    vectors = embedder.embed(["who wrote hamlet", "the capital of france"])
    embedder.embed(["when"])
    assert isinstance(vectors, np.ndarray) and vectors.shape[0] == 2
    assert inner.tokenized == [] and embedder.queries == 3
    assert embedder.tokens == 3 + 4 + 1
    assert inner.tokenized == [["who wrote hamlet", "the capital of france", "when"]]
    assert embedder.tokens == 8 and len(inner.tokenized) == 1  # nothing new: nothing counted
    embedder.embed(["a b"])
    assert embedder.tokens == 10


def test_a_runs_embedding_is_the_difference_of_two_readings() -> None:
    from dataclasses import replace

    from tests.runtime.fakes import random_search

    search = counted(replace(random_search(n=200, nlist=4, nprobe=2), embedder=Tokenizing()))
    assert counted(search) is search
    before = embedded(search)
    search.embed_many(["one two", "three"])
    assert embedded(search) - before == Embedded(queries=2, tokens=3)
