"""The fronts as one PNG: quality (EM, F1) against throughput among the points that meet the
target, and against p95 among all."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ragraph.tune.front import front, low_p95, throughput
from ragraph.tune.measure import Measurement


def plot_fronts(points: Sequence[Measurement], within: Sequence[Measurement],
                chosen: Measurement | None, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    panels = ((throughput, "throughput (req/s), points meeting the target", within,
               lambda m: m.throughput_rps),
              (low_p95, "p95 latency (s)", points, lambda m: m.p95_s))
    for ax, (speed, label, among, x) in zip(axes, panels, strict=True):
        ax.scatter([x(m) for m in points], [100 * m.f1 for m in points], s=14, c="lightgray",
                   label="measured (F1)")
        line = sorted(front(among, speed), key=x)
        ax.plot([x(m) for m in line], [100 * m.em for m in line], "o-", c="tab:red",
                label="front (EM)")
        ax.plot([x(m) for m in line], [100 * m.f1 for m in line], "s--", c="tab:blue",
                label="front (F1)")
        if chosen is not None:
            ax.scatter([x(chosen)], [100 * chosen.em], s=120, facecolors="none",
                       edgecolors="black", label="recommended")
        ax.set_xlabel(label)
        ax.set_ylabel("quality (%)")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
