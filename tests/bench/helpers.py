"""A toy real base (hash-embedded passages in a few topics) for building bench indexes in tests."""

from __future__ import annotations

import numpy as np

from ragraph.bench.data.realbase import RealBase, RealPassage
from ragraph.runtime.outcome import Summary
from tests.runtime.fakes import HashEmbedder

TOPICS = ("Eiffel Tower", "photosynthesis", "Ada Lovelace", "the Nile", "jazz", "Mars")


def toy_base(n: int = 600) -> RealBase:
    passages = tuple(RealPassage(f"toy#{i}", TOPICS[i % len(TOPICS)],
                                 f"passage {i} about {TOPICS[i % len(TOPICS)]}") for i in range(n))
    # Topic clusters: each passage is its topic's vector plus a little of its own.
    topic = HashEmbedder().embed(list(TOPICS))
    own = HashEmbedder().embed([p.text for p in passages])
    vectors = topic[np.arange(n) % len(TOPICS)] + 0.4 * own
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return RealBase("toy" + "0" * 61, passages, vectors.astype(np.float32),
                    {"toy": n}, ("toy corpus",))


def summary(requests: int, errors: int, wall_s: float, throughput_rps: float, p50_s: float,
            p95_s: float, mean_s: float) -> Summary:
    """A run's summary with the fields the bench's tables and CSV read (p99 as p95, no first
    token)."""
    return Summary(requests, errors, wall_s, throughput_rps, p50_s, p95_s, p95_s, mean_s, None)
