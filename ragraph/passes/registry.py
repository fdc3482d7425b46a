"""The known passes by name, their canonical order, and those -O2 runs. An explicit table, not import-time
registration, so what `-O2` means can be read in one place."""

from __future__ import annotations

from ragraph.passes.base import Pass
from ragraph.passes.prefetch import PrefetchPass
from ragraph.passes.prefix_layout import PrefixLayout
from ragraph.passes.reorder import Reorder
from ragraph.passes.rewire import Rewire
from ragraph.passes.speculate import Speculate
from ragraph.passes.split_stages import SplitStages

# A spec must list passes in this order.
_ALL: tuple[type[Pass], ...] = (SplitStages, Reorder, Speculate, Rewire, PrefetchPass, PrefixLayout)
# -O2 runs these with default options, in that order. prefix-layout runs by name only: no engine
# reads its layout for reuse (a radix or block-hash prefix cache reuses the same prompt tokens
# with or without it), and it measured no gain (docs/benchmarks/ablation.md); by name it still
# remarks on prompts that put a per-request value before the documents.
_O2: tuple[type[Pass], ...] = (SplitStages, Reorder, Speculate, Rewire, PrefetchPass)

PASSES: dict[str, type[Pass]] = {cls.name: cls for cls in _ALL}
CANONICAL_ORDER: tuple[str, ...] = tuple(cls.name for cls in _ALL)
O2: tuple[str, ...] = tuple(cls.name for cls in _O2)
