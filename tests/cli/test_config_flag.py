"""`--config FILE.toml` on run, serve and bench, flags given beside it over its values, and
`ragraph.Runtime(config=FILE)`."""

from __future__ import annotations

from pathlib import Path

import pytest

import ragraph
from ragraph.cli import cmd_bench
from ragraph.cli.main import build_parser
from ragraph.cli.options import runtime_config
from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig
from tests.runtime.fakes import random_search

FILE = '[llm]\nengine = "sim"\n[search]\nnprobe = 64\n[scheduler]\nconcurrency = 16\n' \
       'executor = "sequential"\n'


@pytest.fixture
def toml(tmp_path: Path) -> Path:
    path = tmp_path / "ragraph.toml"
    path.write_text(FILE)
    return path


@pytest.mark.parametrize("command", [["run", "w.rag", "-q", "x"], ["serve", "w.rag"]])
def test_run_and_serve_read_the_file_and_flags_override_it(command, toml: Path) -> None:
    config = runtime_config(build_parser().parse_args([*command, "--config", str(toml)]))
    assert (config.llm.engine, config.search.nprobe, config.scheduler.concurrency) == (
        "sim", 64, 16)
    # A flag given overrides the file even where it names the default value.
    args = build_parser().parse_args([*command, "--config", str(toml), "-c", "4",
                                      "--executor", "ragraph"])
    config = runtime_config(args)
    assert (config.scheduler.concurrency, config.scheduler.executor) == (4, "ragraph")
    assert config.search.nprobe == 64


def test_without_a_file_the_flags_left_out_are_the_defaults() -> None:
    config = runtime_config(build_parser().parse_args(["run", "w.rag", "-q", "x"]))
    assert config == RuntimeConfig()


def test_shards_without_a_cluster_is_still_refused_and_a_file_may_name_the_cluster(
        tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^--shards: .*need --ray"):
        runtime_config(build_parser().parse_args(["run", "w.rag", "-q", "x", "--shards", "3"]))
    path = tmp_path / "ray.toml"
    path.write_text('[scale]\nray = "auto"\n')
    args = build_parser().parse_args(["run", "w.rag", "-q", "x", "--config", str(path),
                                      "--shards", "3"])
    assert runtime_config(args).scale.shards == 3


def test_bench_reads_the_run_knobs_of_the_file(toml: Path, tmp_path: Path) -> None:
    path = tmp_path / "bench.toml"
    path.write_text('[llm]\nengine = "sim"\nprofile = "roofline"\n[search]\nnprobe = 64\n'
                    '[scheduler]\nconcurrency = 16\n')
    config = cmd_bench.config_from(build_parser().parse_args(["bench", "--config", str(path)]))
    assert (config.run.llm.profile, config.nprobes, config.concurrencies) == ("roofline", (64,),
                                                                           (16,))
    args = build_parser().parse_args(["bench", "--config", str(path), "--quick",
                                      "--nprobe", "8,16"])
    config = cmd_bench.config_from(args)
    assert (config.nprobes, config.concurrencies) == ((8, 16), (16,))  # over the preset too
    with pytest.raises(ConfigError) as err:
        cmd_bench.config_from(build_parser().parse_args(["bench", "--config", str(toml)]))
    assert err.value.field == "scheduler.executor" and str(toml) in str(err.value)


def test_the_python_api_takes_the_file_with_keywords_over_it(toml: Path) -> None:
    rt = ragraph.Runtime(config=toml, search=random_search(), concurrency=3)
    assert (rt.config.llm.engine, rt.config.search.nprobe) == ("sim", 64)
    assert rt.config.scheduler.concurrency == 3
    assert ragraph.Runtime(str(toml), search=random_search()).config.scheduler.concurrency == 16
    with pytest.raises(ConfigError, match="^config: must be a RuntimeConfig or a TOML file"):
        ragraph.Runtime(config=16)
