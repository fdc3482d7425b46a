"""`ragraph bench --build-only`: the index a run would use is built (or found) and nothing is timed,
so the timed runs start in processes of their own (docs/benchmarks/gpu.md)."""

from __future__ import annotations

from pathlib import Path

from ragraph.bench import driver
from ragraph.bench.index import IndexSpec, ensure_bench_index
from ragraph.cli.main import main

from .helpers import toy_base


def test_build_only_builds_the_index_prints_its_folder_and_runs_no_cell(tmp_path: Path,
                                                                       monkeypatch, capsys):
    built = []

    def prepare(config, cache, bar):
        built.append(config.scale)
        info = ensure_bench_index(tmp_path / "cache", toy_base(300), IndexSpec(scale=config.scale))
        return info, ["data corpora not embedded yet"]

    async def no_run(config, console):
        raise AssertionError("--build-only timed a cell")

    monkeypatch.setattr(driver, "prepare_index", prepare)
    monkeypatch.setattr(driver, "run", no_run)
    out = tmp_path / "out"
    assert main(["bench", "--engine", "sim", "--scale", "3000", "--build-only",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    folder = next(line for line in printed.splitlines() if line.startswith("index: "))
    assert built == [3000]
    assert Path(folder.split()[1]).is_dir() and "3,000 synthetic" in folder
    assert "note: data corpora not embedded yet" in printed  # what the real base says is kept
    assert not (out / "bench.csv").exists()


def test_build_only_with_a_target_or_ray_is_an_error_naming_the_flag(capsys):
    for extra in (["--target", "http://127.0.0.1:9"], ["--ray", "local"]):
        assert main(["bench", "--build-only", *extra]) != 0
        assert "--build-only" in capsys.readouterr().err


def test_a_build_logged_to_a_file_names_each_stage_as_it_starts(tmp_path: Path, monkeypatch):
    """Progress bars draw only on a terminal: a build killed mid-stage must still have said, in
    its log, which stage it was in."""
    import io

    from rich.console import Console

    from ragraph.bench.config import BenchConfig

    log = io.StringIO()
    seen_mid_stage = []

    def real_base(data, cache, start, embed):
        start("embedding the data corpora", 12_000)
        seen_mid_stage.append(log.getvalue())  # before the stage ends
        return toy_base(300)

    monkeypatch.setattr(driver, "ensure_real_base", real_base)
    monkeypatch.setattr(driver, "ensure_bench_index",
                        lambda cache, base, spec, start: ensure_bench_index(cache, base, spec))
    console = Console(file=log, force_terminal=False, width=120)
    with driver.progress_bars(console) as bar:
        driver.prepare_index(BenchConfig(workflow_dir=tmp_path, scale=3000), tmp_path, bar)
    assert "embedding the data corpora: 12,000" in seen_mid_stage[0]
