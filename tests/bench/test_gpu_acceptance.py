"""The GPU acceptance script on a machine without a GPU: its CPU steps run, its GPU steps are
skipped with the reason, and the report says so (benchmarks/gpu_acceptance.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from ragraph.runtime.devices import cuda_available

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_acceptance.py"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_acceptance", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(cuda_available(), reason="checks what the script does without a GPU")
def test_without_a_gpu_the_gpu_steps_say_why_and_the_rest_run(tmp_path: Path) -> None:
    rc = _script().main(["--out", str(tmp_path), "--size", "tiny", "--steps",
                         "machine,cuda-tests,calibrate,hot-cache,list-major,seeds"])
    report = json.loads((tmp_path / "report.json").read_text())
    steps = {s["name"]: s for s in report["steps"]}
    assert rc == 0 and report["size"] == "tiny"
    for name in ("cuda-tests", "calibrate", "hot-cache"):
        assert steps[name]["status"] == "skipped"
        assert steps[name]["detail"] == "no CUDA device on this machine"
    assert steps["seeds"]["status"] == "skipped" and "size full" in steps["seeds"]["detail"]
    assert steps["machine"]["status"] == "passed" and steps["machine"]["figures"]["gpu"] == "none"
    table = steps["list-major"]["figures"]["table"]
    assert steps["list-major"]["status"] == "passed" and table[-1].split()[-1] == "yes"
    # Without a GPU the device lists are torch CPU tensors: the same grouped products, checked.
    assert "list cpu" in table[1] and "dev/pool" in table[1]
    assert [row.split()[-1] for row in table[2:]] == ["yes", "yes"]
    markdown = (tmp_path / "report.md").read_text()
    assert "| cuda-tests | skipped | 0 | no CUDA device on this machine |" in markdown
    assert (tmp_path / "logs" / "list-major.log").exists()


def test_a_failing_step_fails_the_run_and_the_others_still_run(tmp_path: Path,
                                                               monkeypatch) -> None:
    script = _script()
    monkeypatch.setattr(script, "ROOT", tmp_path)  # no project there: every command fails
    monkeypatch.setattr(script, "HERE", tmp_path)
    rc = script.main(["--out", str(tmp_path / "out"), "--size", "tiny", "--steps",
                      "list-major,machine"])
    steps = {s["name"]: s for s in json.loads((tmp_path / "out" / "report.json").read_text())[
        "steps"]}
    assert rc == 1
    assert steps["list-major"]["status"] == "failed" and "exit" in steps["list-major"]["detail"]
    assert steps["machine"]["status"] == "passed"


def test_an_unknown_step_is_named() -> None:
    with pytest.raises(SystemExit, match="unknown step.*'gpu-magic'"):
        _script().main(["--out", "/nonexistent", "--steps", "machine,gpu-magic"])


@pytest.mark.soak  # 125 s in CI; the invariance itself: tests/retrieval/test_query_embedder.py
def test_the_embedder_step_checks_batch_invariance(tmp_path: Path) -> None:
    rc = _script().main(["--out", str(tmp_path), "--size", "tiny", "--steps", "embedder"])
    figures = json.loads((tmp_path / "report.json").read_text())["steps"][0]["figures"]
    assert rc == 0 and figures["questions"] == 8
    assert figures["cpu"]["float64"]["identical_alone_vs_batch"] == "8/8"
    assert figures["cpu"]["int8"]["identical_alone_vs_batch"] == "8/8"
    assert figures["cpu"]["float64"]["ms_batch16"] > 0


def test_the_timed_bench_steps_build_their_index_in_a_process_of_their_own(tmp_path: Path,
                                                                           monkeypatch) -> None:
    """On a fresh GPU machine the run in the process that had just built the index was 35-40%
    slower than the runs after it: the hot cache's on/off pair and the seeds preset are timed in
    processes that did not build (docs/benchmarks/gpu.md)."""
    script = _script()
    commands: list[tuple[str, list[str], int]] = []

    def command(name, argv, out, timeout_s):
        commands.append((name, argv, timeout_s))
        return script.StepResult(name, "passed")

    monkeypatch.setattr(script, "_command", command)
    monkeypatch.setattr(script, "_offline_rps", lambda folder: {})
    script.hot_cache(tmp_path, script.SIZES["tiny"], 90)
    script.seeds(tmp_path, script.SIZES["full"], 90)
    names = [name for name, _, _ in commands]
    assert names == ["hot-cache-build", "hot-cache-hot-cache", "hot-cache-no-hot-cache",
                     "seeds-build", "seeds"]
    builds = [argv for name, argv, _ in commands if name.endswith("-build")]
    timed = [argv for name, argv, _ in commands if not name.endswith("-build")]
    assert all("--build-only" in argv for argv in builds)
    assert not any("--build-only" in argv for argv in timed)
    assert "--scale" in builds[0] and builds[0][builds[0].index("--scale") + 1] == "20000"
    assert sum(t for _, _, t in commands[:3]) <= 90 and sum(t for _, _, t in commands[3:]) <= 90


def test_at_smoke_the_hot_cache_runs_embed_no_data_corpora_and_share_one_index(
        tmp_path: Path, monkeypatch) -> None:
    """Embedding the data corpora held the smoke hot-cache build past 80 s on the H100 machine,
    where a session has 15 minutes of device time: at `smoke` the build and both timed runs are
    `--quick` (data corpora left unembedded) and name the same index, so the timed runs find the
    one the build made."""
    import argparse

    from ragraph.cli import cmd_bench

    script = _script()
    commands: list[list[str]] = []

    def command(name, argv, out, timeout_s):
        commands.append(argv)
        return script.StepResult(name, "passed")

    monkeypatch.setattr(script, "_command", command)
    monkeypatch.setattr(script, "_offline_rps", lambda folder: {})
    script.hot_cache(tmp_path, script.SIZES["smoke"], 90)
    parser = argparse.ArgumentParser()
    cmd_bench.register(parser.add_subparsers())
    configs = [cmd_bench.config_from(parser.parse_args(argv[argv.index("bench"):]))
               for argv in commands]
    assert len(configs) == 3 and all(config.quick for config in configs)
    assert {(c.scale, c.nlist, c.seed) for c in configs} == {(400_000, configs[0].nlist,
                                                              configs[0].seed)}
