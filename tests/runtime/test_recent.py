"""The incremental shared-prefix estimate equals the maximum over exactly the last prompts sent,
however prompts and queries interleave."""

from __future__ import annotations

import os
import random

from ragraph.runtime.scheduler.recent import RecentPrompts


def test_shared_prefix_matches_the_window_it_stands_for():
    rng = random.Random(7)
    words = ["Document 1", "Document 2", "Question", "Answer", "the", "of"]
    recent, sent = RecentPrompts(5), []
    waiting = {k: " ".join(rng.choices(words, k=6)) for k in range(8)}
    for _ in range(300):
        if rng.random() < 0.5:
            prompt = " ".join(rng.choices(words, k=6))
            recent.add(prompt)
            sent.append(prompt)
        key = rng.randrange(8)
        naive = max((len(os.path.commonprefix((waiting[key], p))) for p in sent[-5:]), default=0)
        assert recent.shared(key, waiting[key]) == naive


def test_the_bisecting_prefix_length_equals_commonprefix():
    from ragraph.runtime.scheduler.recent import shared_prefix

    rng = random.Random(3)
    for _ in range(500):
        a = "".join(rng.choices("ab", k=rng.randrange(0, 40)))
        b = a[:rng.randrange(0, len(a) + 1)] + "".join(rng.choices("ab", k=rng.randrange(0, 9)))
        assert shared_prefix(a, b) == shared_prefix(b, a) == len(os.path.commonprefix((a, b)))
