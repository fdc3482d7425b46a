"""Prompts recently sent to the LLM engine, and how much of each waiting prompt they share.

The cache-aware prefill order (RAGCache) estimates a waiting prompt's cached length as the
longest prefix it shares with one of the last `size` prompts sent. Computed afresh every cycle
that is (waiting prompts x `size`) prefix comparisons, which took two thirds of a run's time once
maps put several branches of every request in the queue; here each waiting prompt is compared
with each sent prompt once, and the result is still the maximum over exactly the last `size`.
"""

from __future__ import annotations

from collections import deque


class RecentPrompts:
    def __init__(self, size: int) -> None:
        self.prompts: deque[str] = deque(maxlen=size)
        self.sent = 0
        # Per waiting prompt (by job key): prompts sent when last compared, and the shared prefix
        # length with each of the last `size` sent prompts, aligned with `prompts`.
        self._lengths: dict[int, tuple[int, deque[int]]] = {}

    def add(self, prompt: str) -> None:
        self.prompts.append(prompt)
        self.sent += 1

    def shared(self, key: int, prompt: str) -> int:
        """The longest prefix `prompt` shares with one of the recent prompts."""
        synced, lengths = self._lengths.get(key, (0, deque(maxlen=self.prompts.maxlen)))
        new = min(self.sent - synced, len(self.prompts))
        for sent in list(self.prompts)[len(self.prompts) - new:]:
            lengths.append(shared_prefix(prompt, sent))
        self._lengths[key] = (self.sent, lengths)
        return max(lengths, default=0)

    def forget(self, key: int) -> None:
        self._lengths.pop(key, None)


def shared_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b`, by bisecting on slice equality:
    a few string comparisons in C where `os.path.commonprefix` steps through the shared prefix
    a character at a time in Python (prompts share instructions and documents of thousands of
    characters: it took a quarter of the scheduler loop's time on a simulated HyDE run)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 1:  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo
