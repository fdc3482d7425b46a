"""`ragraph tune --quick` end to end with the simulated engine on the tests' in-memory index:
progress lines, the fronts, the recommendation, the exactness verdict, the plot, the tuned
file; then a rerun resumes every point from the results file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragraph.cli import cmd_tune
from ragraph.cli.main import main
from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.config_file import read_config

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
DEV = [{"id": f"q{i}", "question": q, "golden_answers": [a]} for i, (q, a) in enumerate([
    ("Who designed the Eiffel Tower?", "Gustave Eiffel"),
    ("Who wrote Hamlet?", "William Shakespeare"),
    ("What is the capital of France?", "Paris")])]


def _tune(tmp_path: Path, *extra: str) -> int:
    return main(["tune", str(WORKFLOWS / "hyde.rag"), "--dev", str(tmp_path / "dev.jsonl"),
                 "--engine", "sim", "--quick", "--results", str(tmp_path / "points.jsonl"),
                 *extra])


def test_quick_tune_end_to_end_then_resumes(tmp_path: Path, monkeypatch, capsys):
    from tests.runtime.fakes import random_search

    monkeypatch.setattr(cmd_tune, "open_index", lambda config: random_search())
    (tmp_path / "dev.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DEV))
    plot, out = tmp_path / "front.png", tmp_path / "tuned.toml"
    assert _tune(tmp_path, "--slo", "p95=30s", "--plot", str(plot), "--out", str(out)) == 0
    text = capsys.readouterr().out
    measured = len((tmp_path / "points.jsonl").read_text().splitlines())
    assert text.count("(measured)") == measured > 0
    assert "quality vs throughput (p95 <= 30s)" in text and "quality vs p95" in text
    assert "recommended (p95 <= 30s" in text
    # The shipped default (hyde as written, nprobe 32, -O2, 8 in flight, whole steps, the
    # simulated engine's 8,192 tokens a step) and the recommendation against it, in the same run.
    assert ("the default (nprobe=32 topk=5 rounds=- gen=1 passes=-O2 concurrency=8 "
            "release=step budget=8192): EM") in text
    assert ("the recommendation against it: " in text) != (
        "the recommendation is the default: " in text)
    assert "exactness: OK" in text
    assert plot.stat().st_size > 0
    config = RuntimeConfig.of(read_config(out))
    assert config.llm.engine == "sim" and config.scheduler.concurrency in (2, 8)
    assert config.scheduler.release in ("step", "retrieval")
    assert config.llm.sim_budget in (2048, 8192)
    assert _tune(tmp_path, "--no-plots") == 0
    again = capsys.readouterr().out
    assert "(measured)" not in again and again.count("(from the results file)") == measured


@pytest.mark.parametrize(("text", "seconds"), [("p95=2s", 2.0), ("p95=500ms", 0.5), ("1.5", 1.5)])
def test_slo_forms(text: str, seconds: float):
    assert cmd_tune.parse_slo(text) == seconds


@pytest.mark.parametrize("text", ["p50=2s", "p95=0s", "fast"])
def test_bad_slo_names_the_flag(text: str):
    with pytest.raises(ConfigError, match="--slo"):
        cmd_tune.parse_slo(text)
