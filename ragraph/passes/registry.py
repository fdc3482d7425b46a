"""The known passes by name, and the canonical (-O2) order. An explicit table, not import-time
registration, so what `-O2` means can be read in one place."""

from __future__ import annotations

from ragraph.passes.base import Pass
from ragraph.passes.prefetch import PrefetchPass
from ragraph.passes.prefix_layout import PrefixLayout
from ragraph.passes.reorder import Reorder
from ragraph.passes.rewire import Rewire
from ragraph.passes.speculate import Speculate
from ragraph.passes.split_stages import SplitStages

# -O2 runs these with default options, in this order; a spec must list passes in this order.
_ALL: tuple[type[Pass], ...] = (SplitStages, Reorder, Speculate, Rewire, PrefetchPass, PrefixLayout)

PASSES: dict[str, type[Pass]] = {cls.name: cls for cls in _ALL}
CANONICAL_ORDER: tuple[str, ...] = tuple(cls.name for cls in _ALL)
