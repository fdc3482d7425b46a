"""Latency vs request rate per workflow and executor (as HedraRAG's Figures 12-14), or per pass
variant in the ablation (its Fig. 12 with the passes apart), one PNG per nprobe, one panel per
workload; the engine and the machine are in every figure's title."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from ragraph.bench.run.cells import CellResult

STYLE = {"ragraph": ("tab:red", "o"), "sequential": ("tab:blue", "s"),
         "stage-batched": ("tab:green", "^"), "langgraph": ("tab:purple", "D")}


def latency_vs_rate(rows: Sequence[CellResult], out_dir: Path, title: str,
                    slo_s: float, ablation: bool = False) -> list[Path]:
    """`ablation`: one line per variant (mean latency; the baselines dashed), as HedraRAG's
    Fig. 12 draws it, in `ablation_vs_rate_nprobeN.png`; else p95 and p50 per executor."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    online = [r for r in rows if r.cell.rate is not None]
    written = []
    for nprobe in sorted({r.cell.nprobe for r in online}):
        at = [r for r in online if r.cell.nprobe == nprobe]
        workloads = sorted({r.cell.workload for r in at})
        fig, axes = plt.subplots(1, len(workloads), figsize=(4.2 * len(workloads), 3.6),
                                 squeeze=False)
        panel = _variants_panel if ablation else _panel
        for ax, workload in zip(axes[0], workloads, strict=True):
            panel(ax, [r for r in at if r.cell.workload == workload], workload, slo_s)
        # Wrapped to the figure's width: the engine and machine must stay readable in full.
        width = max(60, int(len(workloads) * 4.2 * 16))
        fig.suptitle(textwrap.fill(f"{title} | nprobe {nprobe}", width), fontsize=8)
        fig.tight_layout()
        name = "ablation_vs_rate" if ablation else "latency_vs_rate"
        path = out_dir / f"{name}_nprobe{nprobe}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def _panel(ax, rows: Sequence[CellResult], workload: str, slo_s: float) -> None:
    for executor in STYLE:
        mine = sorted((r for r in rows if r.executor == executor), key=lambda r: r.cell.rate)
        if not mine:
            continue
        color, marker = STYLE[executor]
        rates = [r.cell.rate for r in mine]
        ax.plot(rates, [r.summary.p95_s for r in mine], color=color, marker=marker,
                label=f"{executor} p95")
        ax.plot(rates, [r.summary.p50_s for r in mine], color=color, marker=marker,
                linestyle=":", alpha=0.6, label=f"{executor} p50")
    _axes(ax, workload, slo_s)


def _variants_panel(ax, rows: Sequence[CellResult], workload: str, slo_s: float) -> None:
    """Mean latency against rate, one line per variant; the baselines (executors, not pass
    sets) dashed."""
    labels = list(dict.fromkeys(r.executor for r in rows))
    colors = _colors(len(labels))
    for label, color in zip(labels, colors, strict=True):
        mine = sorted((r for r in rows if r.executor == label), key=lambda r: r.cell.rate)
        baseline = label in STYLE and label != "ragraph"
        ax.plot([r.cell.rate for r in mine], [r.summary.mean_s for r in mine], color=color,
                marker="s" if baseline else "o", linestyle="--" if baseline else "-",
                label=f"{label} mean")
    _axes(ax, workload, slo_s)


def _colors(n: int) -> list:
    import matplotlib

    cmap = matplotlib.colormaps["tab20"] if n > 10 else matplotlib.colormaps["tab10"]
    return [cmap(i % cmap.N) for i in range(n)]


def _axes(ax, workload: str, slo_s: float) -> None:
    ax.axhline(slo_s, color="grey", linestyle="--", linewidth=0.8, label=f"SLO {slo_s:g} s")
    ax.set_yscale("log")
    ax.set_title(workload)
    ax.set_xlabel("request rate (req/s)")
    ax.set_ylabel("latency (s)")
    ax.legend(fontsize=6)
