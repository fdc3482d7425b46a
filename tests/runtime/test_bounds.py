"""Every size a user gives is bounded at the edge, with an error naming the field: a flag, a
config file's key, a Python keyword, a request's question. The bounds are the rule (`checks`),
not this machine's cores."""

from __future__ import annotations

from pathlib import Path

import pytest

import ragraph
from ragraph.cli.main import main
from ragraph.errors import ConfigError
from ragraph.runtime.checks import (
    MAX_CONCURRENCY,
    MAX_CONTEXT,
    MAX_NPROBE,
    MAX_SHARDS,
    MAX_TEXT_CHARS,
    MAX_THREADS,
)
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.config_file import read_config
from ragraph.runtime.request import Request
from ragraph.serve.settings import LIMITS, ServeSettings, flag
from tests.runtime.fakes import random_search

ONESHOT = Path(__file__).resolve().parents[2] / "workflows" / "oneshot.rag"
BOUNDED = [("search_threads", MAX_THREADS), ("gen_threads", MAX_THREADS),
           ("concurrency", MAX_CONCURRENCY), ("nprobe", MAX_NPROBE), ("shards", MAX_SHARDS)]


@pytest.mark.parametrize("name, most", BOUNDED)
def test_a_size_past_its_bound_is_refused_naming_it(name: str, most: int):
    RuntimeConfig.of(engine="sim", **{name: most})  # the bound itself is taken
    with pytest.raises(ConfigError, match=f"^{name}: must be at most {most:,}, got"):
        RuntimeConfig.of(engine="sim", **{name: most + 1})


def test_the_context_length_is_bounded():
    RuntimeConfig.of(engine="openai", url="http://127.0.0.1:9", ctx=MAX_CONTEXT)
    with pytest.raises(ConfigError, match="^ctx: must be an integer in 16..1,048,576"):
        RuntimeConfig.of(engine="openai", url="http://127.0.0.1:9", ctx=MAX_CONTEXT + 1)


def test_search_threads_flag_of_100000_is_an_error_not_a_crash(capsys):
    assert main(["run", str(ONESHOT), "-q", "Who?", "--engine", "sim",
                 "--search-threads", "100000"]) == 2
    assert "search_threads: must be at most 1,024, got 100,000" in capsys.readouterr().err


def test_runtime_keyword_and_config_file_are_bounded_the_same(tmp_path: Path):
    with pytest.raises(ConfigError, match="^search_threads: must be at most"):
        ragraph.Runtime(engine="sim", search_threads=100_000, search=random_search())
    path = tmp_path / "run.toml"
    path.write_text("[scheduler]\nconcurrency = 1000000\n")
    with pytest.raises(ConfigError, match="^concurrency: must be at most"):
        RuntimeConfig.of(read_config(path))


@pytest.mark.parametrize("name, most", LIMITS.items())
def test_the_server_sizes_are_bounded(name: str, most: int):
    ServeSettings(**{name: most})
    with pytest.raises(ConfigError, match=f"^{flag(name)}: must be at most"):
        ServeSettings(**{name: most + 1})


def test_a_question_past_the_text_bound_is_refused_before_any_work():
    huge = "x" * (MAX_TEXT_CHARS + 1)
    with pytest.raises(ConfigError, match=r"^line 1: question: is 1,000,001 characters; at most"):
        Request.from_json({"question": huge}, "line 1")
    with ragraph.Runtime(engine="sim", search_threads=1, search=random_search()) as rt:
        with pytest.raises(ConfigError, match="is 1,000,001 characters"):
            rt.run(ragraph.load(ONESHOT), huge)


def test_a_knob_of_the_wrong_type_is_an_error_naming_it():
    with pytest.raises(ConfigError, match="^ray: must be text, got 5$"):
        ragraph.Runtime(engine="sim", ray=5, search=random_search())
    with pytest.raises(ConfigError, match="^search_threads: must be an integer, got '4'$"):
        ragraph.Runtime(engine="sim", search_threads="4", search=random_search())
    with pytest.raises(ConfigError, match="^replicas: must be a list of text"):
        ragraph.Runtime(engine="openai", replicas="http://a", search=random_search())


def test_every_value_of_a_bench_sweep_is_bounded():
    from ragraph.bench.run.config import BenchConfig

    with pytest.raises(ConfigError, match="^--concurrency: must be at most 4,096, got 100,000"):
        BenchConfig(concurrencies=(8, 100_000))
    with pytest.raises(ConfigError, match="^--nprobe: must be at most 65,536"):
        BenchConfig(nprobes=(32, 10**9))


def test_a_workflow_input_past_the_text_bound_is_refused_naming_it():
    irg = ragraph.load(ONESHOT.parent / "irg.rag")
    with ragraph.Runtime(engine="sim", search_threads=1, search=random_search()) as rt:
        with pytest.raises(ConfigError, match="^inputs.answer: is 1,000,001 characters"):
            rt.run(irg, "Who?", inputs={"answer": "x" * (MAX_TEXT_CHARS + 1)})
