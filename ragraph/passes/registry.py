"""The known passes by name, and the canonical (-O2) order. An explicit table, not import-time
registration, so what `-O2` means can be read in one place."""

from __future__ import annotations

from ragraph.passes.base import Pass
from ragraph.passes.split_stages import SplitStages

# -O2 runs these, in this order; a spec must list passes in this relative order.
_ALL: tuple[type[Pass], ...] = (SplitStages,)

PASSES: dict[str, type[Pass]] = {cls.name: cls for cls in _ALL}
CANONICAL_ORDER: tuple[str, ...] = tuple(cls.name for cls in _ALL)
