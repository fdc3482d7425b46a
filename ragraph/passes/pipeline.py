"""Pass pipelines from spec strings, run with verification after every pass.

Spec grammar (whitespace ignored):

    spec    := "-O0" | "-O2" | item ("," item)*
    item    := NAME [ "{" option ("," option)* "}" ]
    option  := NAME "=" VALUE          VALUE: true/false, an integer, or a bare word

`-O0` runs nothing; `-O2` (the default) runs the passes of `registry.O2` (every pass but
prefix-layout) with their default options, in the canonical order. Passes in a spec must appear in that order (each at most once): later passes rely on the
structure earlier ones build (e.g. rewire computes hazards over the sub-stages and verify nodes).
"""

from __future__ import annotations

import difflib
import re
import time
import typing
from collections.abc import Callable
from dataclasses import fields

from ragraph.ir.graph import RAGraph
from ragraph.passes.base import Pass, PassContext, PassError
from ragraph.passes.registry import CANONICAL_ORDER, O2, PASSES
from ragraph.program.compiled import PassStat

_ITEM = re.compile(r"\s*([A-Za-z][\w-]*)\s*(?:\{([^{}]*)\})?\s*(?:,|$)")


AfterEach = Callable[[PassStat, RAGraph], None]


def parse_spec(spec: str) -> tuple[Pass, ...]:
    """The passes a spec names, configured; raises PassError naming the bad pass or option."""
    text = spec.strip()
    if text in ("-O0", "O0", ""):
        return ()
    if text in ("-O2", "O2"):
        return tuple(PASSES[name]() for name in O2)
    passes: list[Pass] = []
    pos = 0
    while pos < len(text):
        m = _ITEM.match(text, pos)
        if not m or m.end() == pos:
            raise PassError(f"cannot parse pass spec {spec!r} at column {pos + 1}: expected "
                            "`name` or `name{option=value,...}` separated by commas")
        passes.append(_configure(m.group(1), m.group(2)))
        pos = m.end()
    _check_order(passes)
    return tuple(passes)


def _configure(name: str, options: str | None) -> Pass:
    cls = PASSES.get(name)
    if cls is None:
        raise PassError(f"unknown pass {name!r}{_did_you_mean(name, PASSES)}; known passes: "
                        f"{', '.join(CANONICAL_ORDER)}")
    known = {f.name: f for f in fields(cls)}
    hints = typing.get_type_hints(cls)
    values: dict[str, object] = {}
    for raw in (options or "").split(","):
        if not raw.strip():
            continue
        key, eq, value = (part.strip() for part in raw.partition("="))
        if key not in known:
            choices = ", ".join(known) or "none"
            raise PassError(f"pass {name!r} has no option {key!r}{_did_you_mean(key, known)}; "
                            f"its options: {choices}")
        if not eq or not value:
            raise PassError(f"pass {name!r}: option {key!r} needs a value (`{key}=...`)")
        values[key] = _typed(name, key, value, hints[key])
    return cls(**values)  # type: ignore[arg-type]


def _typed(pass_name: str, key: str, value: str, hint: object) -> object:
    where = f"pass {pass_name!r}: option {key!r}"
    if hint is bool:
        if value not in ("true", "false"):
            raise PassError(f"{where} is true or false, got {value!r}")
        return value == "true"
    if hint is int:
        try:
            return int(value)
        except ValueError:
            raise PassError(f"{where} is an integer, got {value!r}") from None
    return value


def _did_you_mean(word: str, known: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_order(passes: list[Pass]) -> None:
    seen: list[str] = []
    for i, p in enumerate(passes):
        if p.name in seen:
            raise PassError(f"pass {p.name!r} appears twice in the spec")
        missing = [r for r in p.requires if r not in seen]
        if missing:
            fix = ",".join([*missing, *(q.spec() for q in passes[: i + 1])])
            raise PassError(f"pass {p.name!r} needs {', '.join(map(repr, missing))} to run "
                            f"before it; try {fix!r}")
        later = [s for s in seen if CANONICAL_ORDER.index(s) > CANONICAL_ORDER.index(p.name)]
        if later:
            raise PassError(f"pass {p.name!r} must come before {later[0]!r} (the order is "
                            f"{','.join(CANONICAL_ORDER)})")
        seen.append(p.name)


def spec_text(passes: tuple[Pass, ...]) -> str:
    """The canonical spec of configured passes ("-O0" when none)."""
    return ",".join(p.spec() for p in passes) or "-O0"


def run_pipeline(graph: RAGraph, passes: tuple[Pass, ...], ctx: PassContext,
                 after_each: AfterEach | None = None) -> tuple[PassStat, ...]:
    """Apply passes in order to `graph` (mutated), verifying after each one."""
    stats: list[PassStat] = []
    for p in passes:
        stat = _run_one(graph, p, ctx, [s.name for s in stats])
        stats.append(stat)
        if after_each is not None:
            after_each(stat, graph)
    return tuple(stats)


def _run_one(graph: RAGraph, p: Pass, ctx: PassContext, before: list[str]) -> PassStat:
    ctx.current = p.name
    first_remark = len(ctx.remarks)
    nodes0, edges0 = _size(graph)
    start = time.perf_counter()
    try:
        changed = p.apply(graph, ctx)
        graph.verify()
    except Exception as err:  # noqa: BLE001 -- re-raised with the pass named, chained
        ran = f" (after {', '.join(before)})" if before else " (the first pass)"
        raise PassError(f"pass {p.spec()!r} failed{ran}:\n{err}") from err
    seconds = time.perf_counter() - start
    nodes1, edges1 = _size(graph)
    return PassStat(p.name, p.spec(), bool(changed), seconds, (nodes0, nodes1), (edges0, edges1),
                    tuple(ctx.remarks[first_remark:]))


def _size(graph: RAGraph) -> tuple[int, int]:
    return sum(1 for _ in graph.nodes()), sum(1 for _ in graph.edges())
