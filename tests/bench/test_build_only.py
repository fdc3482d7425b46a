"""`ragraph bench --build-only`: the index a run would use is built (or found) and nothing is timed,
so the timed runs start in processes of their own (docs/benchmarks/gpu.md)."""

from __future__ import annotations

from pathlib import Path

from ragraph.bench.data.index import IndexSpec, ensure_bench_index
from ragraph.bench.run import driver
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

    from ragraph.bench.run.config import BenchConfig

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


def _build_writes_the_pid(config) -> None:
    """Run in the build's process (module level: a spawned process imports it)."""
    import os

    (config.out / "built-by").write_text(str(os.getpid()))


def _build_fails_on_a_field(config) -> None:
    from ragraph.errors import ConfigError

    raise ConfigError("--scale", "an index of this size does not fit")


def test_a_missing_index_is_built_in_a_process_of_its_own_before_the_cells(tmp_path: Path,
                                                                          monkeypatch):
    """On a fresh GPU machine the cells timed in the process that had just built the index ran
    35-40% slower than in a later one (docs/benchmarks/gpu.md): `ragraph bench` builds a missing
    index in another process first, and builds nothing apart when it is there."""
    import os

    from ragraph.bench.run.config import BenchConfig

    config = BenchConfig(workflow_dir=tmp_path, out=tmp_path)
    driver.build_apart(config, build=_build_writes_the_pid)
    assert int((tmp_path / "built-by").read_text()) != os.getpid()
    calls = []

    async def run(config, console):
        calls.append("run")
        raise SystemExit(0)

    monkeypatch.setattr(driver, "build_apart", lambda config: calls.append("build apart"))
    monkeypatch.setattr(driver, "run", run)
    for ready, expected in ((False, ["build apart", "run"]), (True, ["run"])):
        calls.clear()
        monkeypatch.setattr(driver, "index_ready", lambda config, cache, ready=ready: ready)
        try:
            main(["bench", "--engine", "sim", "--out", str(tmp_path / "out")])
        except SystemExit:
            pass
        assert calls == expected


def test_an_error_in_the_build_process_reaches_the_user_with_its_field(tmp_path: Path):
    import pytest

    from ragraph.bench.run.config import BenchConfig
    from ragraph.errors import ConfigError

    with pytest.raises(ConfigError, match="--scale: an index of this size") as raised:
        driver.build_apart(BenchConfig(workflow_dir=tmp_path, out=tmp_path),
                           build=_build_fails_on_a_field)
    assert raised.value.field == "--scale"


def test_the_index_is_ready_only_once_its_real_base_and_padded_index_are_built(tmp_path: Path,
                                                                               monkeypatch):
    import dataclasses
    import json

    from ragraph.bench.data import realbase
    from ragraph.bench.run.config import BenchConfig
    from ragraph.runtime.retrieval.build import corpus

    config = BenchConfig(workflow_dir=tmp_path, data=None, scale=3000)
    cache = tmp_path / "cache"
    monkeypatch.setattr(corpus, "current_default_manifest", lambda: None)
    assert not driver.index_ready(config, cache)  # the default index would be built
    monkeypatch.setattr(corpus, "current_default_manifest",
                        lambda: dataclasses.make_dataclass("M", ["checksum"])("abc"))
    assert not driver.index_ready(config, cache)  # the real base would be built
    key, folder, _, _ = realbase._locate(None, cache, True, "abc")
    base = dataclasses.replace(toy_base(300), key=key)
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"counts": {"wikipedia": 300}}))
    assert not driver.index_ready(config, cache)  # the padded index would be built
    ensure_bench_index(cache, base, IndexSpec(scale=3000))
    assert driver.index_ready(config, cache)
    assert not driver.index_ready(dataclasses.replace(config, scale=4000), cache)


def _build_dies(config) -> None:
    import os

    os._exit(9)


def test_a_build_process_that_dies_is_an_error_saying_so(tmp_path: Path):
    import pytest

    from ragraph.bench.run.config import BenchConfig
    from ragraph.errors import RagraphError

    with pytest.raises(RagraphError, match="ended without finishing"):
        driver.build_apart(BenchConfig(workflow_dir=tmp_path, out=tmp_path), build=_build_dies)
