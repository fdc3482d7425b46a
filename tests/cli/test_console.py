"""Off a terminal (a log, CI, a pipe, a file) the tables keep their column names and values
whole: rich alone would lay them out in 80 columns and cut `ragraph tune`'s front to "np…",
"10…" (ragraph/console.py)."""

from __future__ import annotations

import io
import os

import pytest
from rich.console import Console

from ragraph.console import OFF_TERMINAL_WIDTH, new_console
from ragraph.tune.front import front, low_p95
from ragraph.tune.report import front_table
from tests.tune.surface import every_point

COLUMNS = ("nprobe", "topk", "rounds", "gen", "passes", "conc", "EM", "F1", "recall", "req/s",
           "pred", "err", "p95 s")


def tune_front():
    points = front(every_point(), low_p95)
    return front_table("front", points, points[0])


def printed(console_file, make=new_console) -> None:
    make(file=console_file, highlight=False).print(tune_front())
    console_file.flush()


@pytest.fixture(autouse=True)
def no_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


def test_a_table_printed_to_a_pipe_keeps_every_column_name_and_value():
    read, write = os.pipe()
    with os.fdopen(write, "w") as out:
        printed(out)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    header = next(line for line in text.splitlines() if "nprobe" in line)
    assert all(name in header for name in COLUMNS), header
    assert "…" not in text


def test_a_table_printed_to_a_file_is_as_wide_as_it_needs_and_no_wider(tmp_path):
    with open(tmp_path / "log.txt", "w", encoding="utf-8") as out:
        printed(out)
    text = (tmp_path / "log.txt").read_text(encoding="utf-8")
    assert "…" not in text and all(name in text for name in COLUMNS)
    assert 80 < max(map(len, text.splitlines())) < OFF_TERMINAL_WIDTH


def test_rich_alone_cuts_the_same_table_to_80_columns():
    """What the console fixes: the same table through rich's own default off a terminal."""
    out = io.StringIO()
    printed(out, make=Console)
    assert "…" in out.getvalue() and max(map(len, out.getvalue().splitlines())) <= 80


def test_columns_or_a_width_given_still_decide(monkeypatch):
    assert new_console(file=io.StringIO(), width=100).width == 100
    monkeypatch.setenv("COLUMNS", "120")
    assert new_console(file=io.StringIO()).width == 120
