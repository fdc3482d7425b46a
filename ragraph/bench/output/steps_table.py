"""How the LLM engine's steps were made up, per run: what decides whether decode rides in the
prompt passes (stall-free batching) or waits behind them, for every executor alike."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from ragraph.bench.run.cells import CellResult

STEPS_LEGEND = (
    "engine steps: decode-only steps advance the running sequences and nothing else; mixed "
    "passes compute prompt tokens with decode tokens riding in them; prompt passes count the "
    "mixed ones too; worst wait: the longest a decoding sequence waited for its next token "
    "across prompt work; idle: seconds the engine had nothing to compute (simulated seconds "
    "on sim); '-': the engine does not show it")


def steps_table(rows: Sequence[CellResult], caption: str) -> Table:
    table = Table(title="Engine steps, per run (the LLM engine's own counts)", caption=caption)
    for col in ("workload", "nprobe", "conc", "executor", "req/s", "decode-only steps",
                "mixed passes", "prompt passes", "worst wait ms", "engine idle s"):
        table.add_column(col, justify="left" if col in ("workload", "executor") else "right")
    for r in rows:
        llm = r.llm
        seen = llm.decode_only_steps or llm.mixed_steps or llm.prompt_pass_count
        table.add_row(r.cell.workload, str(r.cell.nprobe), str(r.cell.concurrency), r.executor,
                      f"{r.summary.throughput_rps:.2f}",
                      f"{llm.decode_only_steps:,}" if seen else "-",
                      f"{llm.mixed_steps:,}" if seen else "-",
                      f"{llm.prompt_pass_count:,}" if seen else "-",
                      f"{llm.worst_decode_wait_s * 1e3:.0f}" if llm.worst_decode_wait_s else "-",
                      f"{llm.idle_s:.2f}" if llm.idle_s else "-")
    return table
