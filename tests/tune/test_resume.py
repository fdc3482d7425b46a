"""Resume: a tune killed after k points, run again on its results file, measures only the
points it had not measured; a line a kill cut short is measured again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ragraph.errors import ConfigError
from ragraph.tune.results import Results
from ragraph.tune.search import Step, search

from .surface import SPACE, Counting


def _run(measure: Counting, path: Path, steps: list[Step] | None = None):
    results = Results.open(path, "ctx")
    done = steps if steps is not None else []
    return asyncio.run(search(SPACE, measure, results, done.append))


def test_a_rerun_measures_no_point_twice(tmp_path: Path):
    path = tmp_path / "tune.jsonl"
    killed = Counting(fail_after=7)
    with pytest.raises(KeyboardInterrupt):
        _run(killed, path)
    assert len(path.read_text().splitlines()) == 7
    again, steps = Counting(), []
    searched = _run(again, path, steps)
    assert not set(killed.calls) & set(again.calls)
    assert [s.resumed for s in steps[:7]] == [True] * 7 and not any(s.resumed for s in steps[7:])
    whole = Counting()
    assert {m.point for m in searched.measured} == \
           {m.point for m in _run(whole, tmp_path / "fresh.jsonl").measured}
    assert len(again.calls) + len(killed.calls) == len(whole.calls)
    third = Counting()
    _run(third, path)
    assert third.calls == []


def test_a_line_cut_short_is_measured_again(tmp_path: Path):
    path = tmp_path / "tune.jsonl"
    with pytest.raises(KeyboardInterrupt):
        _run(Counting(fail_after=3), path)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + lines[2][:40])
    again = Counting()
    _run(again, path)
    assert again.calls[0] == json_point_key(lines[2])
    assert len(path.read_text().splitlines()) == len(again.calls) + 2


def json_point_key(line: str) -> str:
    from ragraph.tune.space import Point

    return Point.from_json(json.loads(line)["point"]).key


def test_points_of_another_run_are_refused(tmp_path: Path):
    path = tmp_path / "tune.jsonl"
    with pytest.raises(KeyboardInterrupt):
        _run(Counting(fail_after=1), path)
    with pytest.raises(ConfigError, match="another run"):
        Results.open(path, "another context")
