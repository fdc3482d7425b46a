"""Which questions a bench run asks: `uniform` (each question of the pool once, in turn) or
`zipf:ALPHA` (popular questions asked again and again, as real traffic repeats itself), and how
skewed the documents those requests retrieved turned out to be.

RAGCache (Jin et al., 2024) builds its cross-request document KV reuse on skewed document
popularity: in its measurement the top 3% of documents serve 60% of retrievals. Uniform traffic
over hundreds of distinct questions has little document overlap, so that reuse never shows.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ragraph.errors import ConfigError

# RAGCache's measure: the share of retrievals the top 3% of documents served.
TOP_FRACTION = 0.03
RAGCACHE_TOP_SHARE = 0.60


@dataclass(frozen=True)
class Traffic:
    """alpha None: uniform; else question rank r is asked with probability proportional to
    1 / r**alpha, over the workflow's whole question list (up to 2,000 a dataset)."""

    alpha: float | None = None

    def __post_init__(self) -> None:
        if self.alpha is not None and not (self.alpha > 0 and math.isfinite(self.alpha)):
            raise ConfigError("--traffic", f"zipf:ALPHA needs ALPHA > 0, got {self.alpha}")

    @classmethod
    def parse(cls, text: str) -> Traffic:
        """`uniform` or `zipf:ALPHA`, as --traffic takes it."""
        text = text.strip()
        if text == "uniform":
            return cls()
        kind, _, value = text.partition(":")
        if kind != "zipf" or not value:
            raise ConfigError("--traffic", f"expected uniform or zipf:ALPHA, got {text!r}")
        try:
            alpha = float(value)
        except ValueError:
            raise ConfigError("--traffic", f"ALPHA must be a number, got {value!r}") from None
        return cls(alpha)

    def __str__(self) -> str:
        return "uniform" if self.alpha is None else f"zipf:{self.alpha:g}"

    def picks(self, pool_size: int, count: int, offset: int, seed: int) -> list[int]:
        """Indices into a question list of `pool_size` for `count` requests. Uniform walks the
        list from `offset` (cells at other seeds ask other questions); Zipf draws ranks from the
        seeded rng, rank 1 being the list's first question. The draw depends only on the
        arguments, so every executor of a cell (one `make_jobs`) asks the same questions."""
        if self.alpha is None:
            return [(offset + i) % pool_size for i in range(count)]
        weights = 1.0 / np.arange(1, pool_size + 1, dtype=np.float64) ** self.alpha
        rng = np.random.default_rng(seed)
        return [int(i) for i in rng.choice(pool_size, size=count, p=weights / weights.sum())]


UNIFORM = Traffic()


def top_share(retrievals: Iterable[Sequence[int]],
              fraction: float = TOP_FRACTION) -> float | None:
    """Share of the retrieved passages (a passage id per top-k slot, over every retrieval given)
    that the most retrieved `fraction` of the distinct documents served: RAGCache's measure.
    The documents are those retrieved at all (at least one counts), since a corpus of millions
    would make any top 3% of it serve every retrieval. None: nothing was retrieved."""
    counts = Counter(pid for ids in retrievals for pid in ids)
    total = sum(counts.values())
    if not total:
        return None
    top = max(1, math.ceil(fraction * len(counts)))
    return sum(n for _, n in counts.most_common(top)) / total
