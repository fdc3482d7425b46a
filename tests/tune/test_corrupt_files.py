"""A results or front file that is corrupt (truncated, edited, another encoding, another
workflow's) is one ConfigError naming the file and the line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragraph.errors import ConfigError
from ragraph.tune.levels import front_levels, write_front
from ragraph.tune.measure import Measurement
from ragraph.tune.results import Results
from ragraph.tune.space import Point

GOOD = Measurement(Point(8, 2, None, "-O2", 8), 0.4, 0.5, 0.6, 3.0, 0.3, 0, (("q1", "a"),))


def line(**changes: object) -> str:
    raw = {"context": "ctx", **GOOD.to_json(), **changes}
    return json.dumps({k: v for k, v in raw.items() if v is not ...}) + "\n"


# (what is wrong, the file's bytes, what the error says); each breaks line 2 of 3.
CORRUPT = [
    ("torn in the middle", line().encode() + b'{"context": "ctx", "po\n' + line().encode(),
     ":2: not a JSON line"),
    ("not UTF-8", line().encode() + b'{"context": "\xff\xfe"}\n' + line().encode(),
     ":2: not UTF-8"),
    ("a JSON array", line().encode() + b"[1, 2]\n" + line().encode(), ":2: not a measured point"),
    ("a JSON number", line().encode() + b"42\n" + line().encode(), ":2: not a measured point"),
    ("a key missing", (line() + line(em=...) + line()).encode(), ":2: a measured point without"),
    ("a number as text", (line() + line(em="high") + line()).encode(), ":2: a field of the wrong"),
    ("the point a list", (line() + line(point=[1, 2]) + line()).encode(), ":2: a field of the"),
    ("the answers a number", (line() + line(answers=5) + line()).encode(), ":2: a field of the"),
    ("a point field null", (line() + line(point={**GOOD.point.to_json(), "nprobe": None})
                            + line()).encode(), ":2: a field of the wrong type"),
]


# Each file as its reader opens it: tune's results (--results), serve --adapt's front (--adapt).
READERS = [("tune.jsonl", lambda path: Results.open(path, "ctx"), "--results"),
           ("tuned.front.jsonl", lambda path: front_levels(path, "hyde"), "--adapt")]


@pytest.mark.parametrize("name, read, flag", READERS, ids=["results", "front"])
@pytest.mark.parametrize("what, data, says", CORRUPT, ids=[c[0] for c in CORRUPT])
def test_a_corrupt_file_is_one_error_naming_its_line(tmp_path: Path, name: str, read, flag: str,
                                                     what: str, data: bytes, says: str):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ConfigError) as err:
        read(path)
    assert err.value.field == flag
    assert f"{path}{says}" in str(err.value)


def test_an_empty_or_blank_results_file_is_no_points_and_a_folder_is_an_error(tmp_path: Path):
    for text in ("", "\n\n"):
        (tmp_path / "tune.jsonl").write_text(text)
        assert Results.open(tmp_path / "tune.jsonl", "ctx").measured == {}
    (tmp_path / "folder").mkdir()
    with pytest.raises(ConfigError, match="cannot read"):
        Results.open(tmp_path / "folder", "ctx")


def test_a_front_tuned_for_another_workflow_is_refused_naming_both(tmp_path: Path):
    cheap = Measurement(Point(4, 1, None, "-O2", 8), 0.2, 0.2, 0.2, 5.0, 0.2, 0, ())
    path = write_front(tmp_path / "tuned.front.jsonl", [GOOD, cheap], "hyde")
    assert len(front_levels(path, "hyde")) == 2
    with pytest.raises(ConfigError, match="tuned for workflow 'hyde', not 'oneshot'"):
        front_levels(path, "oneshot")


def test_a_results_file_names_its_workflow_so_adapt_can_check_it(tmp_path: Path):
    path = tmp_path / "tune.jsonl"
    Results.open(path, "ctx", "hyde").add(GOOD)
    assert json.loads(path.read_text())["workflow"] == "hyde"
    with pytest.raises(ConfigError, match="tuned for workflow 'hyde', not 'oneshot'"):
        front_levels(path, "oneshot")
