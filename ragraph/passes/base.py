"""The pass protocol: a small named frozen dataclass whose fields are its options.

`apply(graph, ctx)` edits the mutable graph in place and returns whether it changed anything.
Passes say what MAY happen (a split point, a speculative edge, a prefetch); runtime policies decide
per cycle whether it happens, and no pass may change what a request computes unless the option that
does so is documented as changing prompts (and is off in -O2).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar

from ragraph.errors import RagraphError
from ragraph.ir.graph import RAGraph
from ragraph.ir.listing import fmt
from ragraph.program.compiled import Remark


class PassError(RagraphError):
    """A bad pass spec or option, or a pass that failed; the message names the pass and option."""


@dataclass
class PassContext:
    """What a pass may consult besides the graph: the uncompiled original, and a remark sink."""

    original: RAGraph
    current: str = ""
    remarks: list[Remark] = field(default_factory=list)

    def remark(self, node: str, message: str) -> None:
        self.remarks.append(Remark(self.current, node, message))


@dataclass(frozen=True)
class Pass:
    """Base of every pass. Subclasses are frozen dataclasses; fields are options (bool/int/str)."""

    name: ClassVar[str] = "pass"
    summary: ClassVar[str] = ""
    # Passes that must have run earlier in the pipeline (sub-stage passes need split-stages).
    requires: ClassVar[tuple[str, ...]] = ()

    def apply(self, graph: RAGraph, ctx: PassContext) -> bool:
        raise NotImplementedError

    def spec(self) -> str:
        """The canonical spec text, e.g. `speculate{retrieval=false}` (only non-default options)."""
        opts = [f"{f.name}={fmt(getattr(self, f.name))}" for f in fields(self)
                if getattr(self, f.name) != f.default]
        return self.name + ("{" + ",".join(opts) + "}" if opts else "")


def positive(pass_name: str, option: str, value: int) -> None:
    """Validation shared by passes' __post_init__."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PassError(f"pass {pass_name!r}: option {option!r} must be a positive integer, "
                        f"got {value!r}")
