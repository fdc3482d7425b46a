"""What each pass is worth: the same workload under -O0, each pass alone, -O2 without each pass,
and -O2, in one run (HedraRAG's ablation figures are the anchor), the baselines beside them.
Offline (everything at t=0) and online (Poisson arrivals at each of --rates: where speculation
and sub-stages act, as HedraRAG measures them; `bench.output.online_ablation`).

A pass that needs another (reorder, speculate and prefix-layout need split-stages) runs "alone"
with what it needs; -O2 without split-stages also drops the passes that need it (said in the
table). A pass outside -O2 (prefix-layout) is measured added to it: "-O2 +name"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragraph.bench.run.cells import CellResult, Variant, plain
from ragraph.errors import ConfigError
from ragraph.passes import CANONICAL_ORDER, O2, PASSES


def ablation_variants(baselines: Sequence[str] = (), passes: str = "-O2",
                      chosen: Sequence[str] | None = None) -> list[Variant]:
    """The ablation's runs, then the `baselines` (executors) beside them; `chosen`: only the
    variants of these labels (`--variants`), in the ablation's order."""
    out = ablation() + plain([b for b in baselines if b != "ragraph"], passes)
    if chosen is None:
        return out
    known = [v.label for v in out]
    unknown = [c for c in chosen if c not in known]
    if unknown:
        raise ConfigError("--variants", f"no variant {', '.join(map(repr, unknown))}; the "
                          f"variants are: {', '.join(known)}")
    return [v for v in out if v.label in chosen]


def ablation() -> list[Variant]:
    out = [Variant("-O0", "ragraph", "-O0")]
    for name in CANONICAL_ORDER:
        out.append(Variant(f"only {name}", "ragraph", ",".join(_with_requirements(name))))
    for name in CANONICAL_ORDER:
        out.append(Variant(_beside_o2(name), "ragraph", ",".join(_o2_toggled(name)) or "-O0"))
    out.append(Variant("-O2", "ragraph", "-O2"))
    return out


def _beside_o2(name: str) -> str:
    """The label of -O2 with `name` toggled: left out of it, or added where -O2 lacks it."""
    return f"-O2 -{name}" if name in O2 else f"-O2 +{name}"


def _o2_toggled(name: str) -> list[str]:
    if name in O2:
        return [q for q in O2 if q not in _dropped_with(name)]
    wanted = {*O2, *_with_requirements(name)}
    return [q for q in CANONICAL_ORDER if q in wanted]


def _with_requirements(name: str) -> list[str]:
    wanted = {name, *PASSES[name].requires}
    return [q for q in CANONICAL_ORDER if q in wanted]


def _dropped_with(name: str) -> set[str]:
    return {name} | {q for q in CANONICAL_ORDER if name in PASSES[q].requires}


@dataclass(frozen=True)
class Contribution:
    name: str
    alone_thr: float | None  # (only pass) / -O0 throughput
    alone_p95: float | None  # -O0 p95 / (only pass) p95: > 1 is lower latency
    marginal_thr: float | None  # -O2 with the pass / -O2 without it
    marginal_p95: float | None
    also_dropped: tuple[str, ...]


def contributions(rows: Sequence[CellResult]) -> list[Contribution]:
    """Per pass, from the offline runs of one cell (labels as `ablation()` makes them)."""
    by = {r.executor: r for r in rows}

    def ratio(a: str, b: str, field: str, inverse: bool = False) -> float | None:
        if a not in by or b not in by:
            return None
        x, y = getattr(by[a].summary, field), getattr(by[b].summary, field)
        num, den = (y, x) if inverse else (x, y)
        return num / den if den else None

    out = []
    for name in CANONICAL_ORDER:
        alone = f"only {name}"
        with_, without = ("-O2", _beside_o2(name)) if name in O2 else (_beside_o2(name), "-O2")
        out.append(Contribution(
            name, ratio(alone, "-O0", "throughput_rps"), ratio(alone, "-O0", "p95_s", True),
            ratio(with_, without, "throughput_rps"), ratio(with_, without, "p95_s", True),
            tuple(sorted(_dropped_with(name) - {name})) if name in O2 else ()))
    return out
