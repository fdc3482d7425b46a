"""Which retrieval paths run on the GPU: on by default with CUDA, off and said so without it, and
the flags of `ragraph run` and `ragraph bench` that change it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragraph.cli import cmd_bench
from ragraph.cli.main import build_parser, main
from ragraph.cli.options import runtime_config
from ragraph.errors import ConfigError
from ragraph.runtime.app import on_gpu_paths
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.devices import cuda_available, gpu_paths
from tests.runtime import fakes

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


def test_with_cuda_the_embedder_is_on_the_gpu_and_the_hot_cache_only_when_asked() -> None:
    # The cache measured no faster end to end on an H200 (docs/benchmarks/gpu.md): off by default.
    paths = gpu_paths(None, cuda=True)
    assert (paths.device, paths.hot_cache) == ("cuda", False)
    assert "query embedder cuda" in paths.describe() and "--hot-cache turns it on" in paths.describe()
    on = gpu_paths(True, cuda=True)
    assert on.hot_cache and "on, cuda" in on.describe()
    off = gpu_paths(False, cuda=True)
    assert not off.hot_cache and "--no-hot-cache" in off.describe()


def test_without_cuda_everything_runs_on_the_cpu_and_says_why() -> None:
    paths = gpu_paths(None, cuda=False)
    assert (paths.device, paths.hot_cache) == ("cpu", False)
    text = paths.describe()
    assert "query embedder cpu (no CUDA device)" in text and "cache + prefetch off" in text
    forced = gpu_paths(True, cuda=False)
    assert forced.hot_cache and forced.device == "cpu" and "nothing to gain" in forced.describe()


def test_run_config_follows_this_machine(monkeypatch) -> None:
    assert RuntimeConfig.of(engine="sim").gpu == gpu_paths(None, cuda_available())
    monkeypatch.setattr("ragraph.runtime.retrieval.settings.cuda_available", lambda: True)
    assert RuntimeConfig.of(engine="sim").gpu.device == "cuda"
    assert not RuntimeConfig.of(engine="sim").gpu.hot_cache
    assert RuntimeConfig.of(engine="sim", hot_cache=True).gpu.hot_cache
    assert not RuntimeConfig.of(engine="sim", hot_cache=False).gpu.hot_cache
    monkeypatch.setattr("ragraph.runtime.retrieval.settings.cuda_available", lambda: False)
    assert not RuntimeConfig.of(engine="sim").gpu.hot_cache


def test_search_engine_gets_the_hot_cache_only_when_it_is_on(monkeypatch) -> None:
    monkeypatch.setattr("ragraph.runtime.retrieval.settings.cuda_available", lambda: False)
    base = fakes.random_search().engine
    assert on_gpu_paths(base, RuntimeConfig.of(engine="sim").search) is base
    tiered = on_gpu_paths(base, RuntimeConfig.of(engine="sim", hot_cache=True).search)
    assert tiered.cache.device == "cpu" and tiered.nlist == base.nlist
    tiered.cache.close()


@pytest.mark.parametrize("flags, want", [([], None), (["--hot-cache"], True),
                                         (["--no-hot-cache"], False)])
def test_hot_cache_flags_of_run_and_bench(flags: list[str], want: bool | None) -> None:
    run = build_parser().parse_args(["run", "x.rag", "-q", "x", "--engine", "sim", *flags])
    assert runtime_config(run).search.hot_cache is want
    bench = build_parser().parse_args(["bench", "--profile", "roofline", *flags])
    config = cmd_bench.config_from(bench)
    assert config.run.search.hot_cache is want and config.runtime().search.hot_cache is want
    assert config.runtime().llm.profile == "roofline"


def test_profile_is_for_the_sim_engine_only() -> None:
    with pytest.raises(ConfigError, match="profile"):
        RuntimeConfig.of(engine="llamacpp", profile="roofline")
    args = build_parser().parse_args(["bench", "--engine", "llamacpp", "--profile", "x.json"])
    with pytest.raises(ConfigError, match="--profile"):
        cmd_bench.config_from(args)


def test_bad_profile_file_fails_before_anything_loads(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "ragraph-gpu-profile/1"}')
    code = main(["run", str(WORKFLOWS / "hyde.rag"), "-q", "x", "--engine", "sim",
                 "--profile", str(bad)])
    assert code == 2 and "bad.json: model" in capsys.readouterr().err


def test_run_says_which_gpu_paths_are_on_and_the_sim_profile(capsys) -> None:
    code = main(["run", str(WORKFLOWS / "hyde.rag"), "-q", "x", "--engine", "sim",
                 "--index", "/nonexistent/index"])
    err = capsys.readouterr().err
    assert code == 2 and "/nonexistent/index" in err
    assert "SIMULATED" in err and "measured profile h100-llama-3.1-8b" in err
    assert gpu_paths(None, cuda_available()).describe() in " ".join(err.split())
