"""The bench's engine-steps table: each run's decode-only steps, mixed and prompt passes, worst
decode wait and idle time, as the engine counted them; '-' where it does not count them."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from ragraph.bench.measure.llm_work import LlmWork
from ragraph.bench.output.steps_table import steps_table
from ragraph.runtime.llm.protocol import NO_PASSES, pass_bucket
from tests.bench.test_results import row


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("│") if c.strip()]


def rendered(rows) -> str:
    console = Console(width=200, record=True)
    console.print(steps_table(rows, "caption"))
    return console.export_text()


def test_each_run_shows_how_its_engine_steps_were_made_up():
    passes = list(NO_PASSES)
    passes[pass_bucket(900)] = 7
    counted = replace(row("ragraph", None, 40.0, 1.0), llm=LlmWork(
        decode_only_steps=52, mixed_steps=5, prompt_passes=tuple(passes),
        worst_decode_wait_s=0.233, idle_s=0.41))
    http = row("sequential", None, 30.0, 1.0)  # an engine that counts none of it
    text = rendered([counted, http])
    line = next(t for t in text.splitlines() if "ragraph" in t)
    assert cells(line)[-5:] == ["52", "5", "7", "233", "0.41"]
    other = next(t for t in text.splitlines() if "sequential" in t)
    assert cells(other)[-5:] == ["-"] * 5
