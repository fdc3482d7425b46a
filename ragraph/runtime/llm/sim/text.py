"""Deterministic text for the simulated engine: a toy tokenizer and seeded output plans.

The simulated engine must give the same output for the same prompt (greedy determinism, the
baselines comparing answers) without a model. Output is words from a fixed vocabulary chosen by a
generator seeded from a hash of the prompt tokens (plus the request seed when sampling); the
output length comes from a seeded exponential distribution or is replayed from a trace. A sequence
that does not stop at a line break starts a new line every `LINE_WORDS` words, so a list output
(one item a line) gets several items.
"""

from __future__ import annotations

import hashlib
import random
import re
import zlib
from collections import OrderedDict
from dataclasses import dataclass

# Words, each with its leading whitespace, or single punctuation marks: close enough to a BPE
# tokenizer's counts for English text (about 1.3 tokens per word) for a cost model.
_TOKEN_RE = re.compile(r"\s*[A-Za-z0-9]+|\s*[^A-Za-z0-9\s]|\s+$")

_WORDS: tuple[str, ...] = tuple(
    (
        "the of and to in is was for on that with as by it from at his an were are which this be "
        "has or had first one their its new after but who not they have her she two been other "
        "when there all during into school time may years more most only over city some world "
        "would where later up such used many can state about national out known university "
        "united then made year him between part three team season river war american"
    ).split()
)


LINE_WORDS = 4


def token_id(piece: str, vocab_size: int) -> int:
    """A stable id for a token's text (crc32, not Python's salted `hash`)."""
    return zlib.crc32(piece.encode("utf-8")) % vocab_size


def tokenize(text: str, vocab_size: int) -> tuple[int, ...]:
    return tuple(token_id(p, vocab_size) for p in _TOKEN_RE.findall(text))


@dataclass(frozen=True)
class OutputPlan:
    """The tokens a simulated sequence will produce, decided at admission."""

    pieces: tuple[str, ...]
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    # True when the sequence ends on its own (an end-of-sequence) before max_new_tokens.
    ends_naturally: bool


def plan_output(
    prompt_ids: tuple[int, ...],
    max_new_tokens: int,
    *,
    seed: int | None,
    greedy: bool,
    mean_output_tokens: float,
    output_lengths: tuple[int, ...] | None,
    vocab_size: int,
    line_breaks: bool = False,
) -> OutputPlan:
    digest = hashlib.sha256(b",".join(str(t).encode() for t in prompt_ids)).digest()
    key = int.from_bytes(digest[:8], "little")
    if not greedy:
        key ^= (seed if seed is not None else 0) * 0x9E3779B97F4A7C15 + 1
    rng = random.Random(key)
    if output_lengths:
        natural = output_lengths[key % len(output_lengths)]
    else:
        natural = max(1, round(rng.expovariate(1.0 / mean_output_tokens)))
    n = min(natural, max_new_tokens)
    pieces = tuple(("\n" if line_breaks and i % LINE_WORDS == LINE_WORDS - 1 else " ")
                   + rng.choice(_WORDS) for i in range(n))
    return OutputPlan(
        pieces=pieces,
        token_ids=tuple(token_id(p, vocab_size) for p in pieces),
        logprobs=tuple(-rng.random() * 2.0 for _ in range(n)),
        ends_naturally=natural <= max_new_tokens,
    )


class BlockPrefixCache:
    """Which prompt prefixes a server's prefix cache would hold, in blocks of `block` tokens.

    Blocks are keyed by a hash chained over the prefix (as vLLM's automatic prefix caching does),
    kept in LRU order and bounded by `capacity_tokens`.
    """

    def __init__(self, capacity_tokens: int, block: int) -> None:
        self._capacity = max(0, capacity_tokens // block)
        self._block = block
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def _chain(self, ids: tuple[int, ...]) -> list[int]:
        keys, prev = [], 0
        for start in range(0, len(ids) - self._block + 1, self._block):
            prev = hash((prev, ids[start : start + self._block]))
            keys.append(prev)
        return keys

    def lookup(self, ids: tuple[int, ...]) -> int:
        """Tokens of `ids` already cached (a multiple of the block), refreshing their LRU slot.
        At least one token is always computed, as a real server must produce logits."""
        hits = 0
        for key in self._chain(ids):
            if key not in self._blocks:
                break
            self._blocks.move_to_end(key)
            hits += 1
        return min(hits * self._block, max(len(ids) - 1, 0))

    def insert(self, ids: tuple[int, ...]) -> None:
        if self._capacity == 0:
            return
        for key in self._chain(ids):
            self._blocks[key] = None
            self._blocks.move_to_end(key)
        while len(self._blocks) > self._capacity:
            self._blocks.popitem(last=False)
