"""`--exact` is one of the runtime flags `run` and `serve` share: it selects llama.cpp's
serial-exact mode (one running sequence, no prefix slots), says so where the engine is named,
and is refused with an engine it does not apply to."""

from __future__ import annotations

import pytest

from ragraph.cli.main import build_parser
from ragraph.cli.options import runtime_config
from ragraph.cli.run_single import engine_label
from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig
from tests.real import need_module


@pytest.mark.parametrize("command", [["run", "w.rag", "-q", "x"], ["serve", "w.rag"]])
def test_run_and_serve_take_exact_and_say_what_it_means(command, capsys):
    args = build_parser().parse_args([*command, "--exact"])
    assert runtime_config(args).llm.exact is True
    assert runtime_config(build_parser().parse_args(command)).llm.exact is False
    with pytest.raises(SystemExit):
        build_parser().parse_args([command[0], "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--exact llama.cpp's serial-exact mode: one generation at a time" in shown
    assert "from run and serve alike" in shown


def test_exact_builds_llamacpp_with_one_sequence_and_no_prefix_slots():
    need_module("llama_cpp")
    from ragraph.runtime.app import create_llm

    config = RuntimeConfig.of(exact=True, concurrency=8)
    engine = create_llm(config)  # not started: no model is loaded
    assert (engine.config.max_running, engine.config.prefix_slots) == (1, 0)
    batched = create_llm(RuntimeConfig.of(concurrency=8)).config
    assert batched.max_running > 1 and batched.prefix_slots > 0
    assert "serial-exact" in engine_label(config)
    assert "batched" in engine_label(RuntimeConfig())


@pytest.mark.parametrize("engine", ["sim", "openai"])
def test_exact_is_refused_where_it_does_not_apply(engine):
    with pytest.raises(ConfigError, match="exact: the serial-exact engine is llama.cpp's"):
        RuntimeConfig.of(engine=engine, url="http://127.0.0.1:1", exact=True)
