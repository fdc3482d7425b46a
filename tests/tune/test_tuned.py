"""The tuned file round trip: what tune writes loads with the config-file loader into the same
knobs, and a moved top-k or loop bound comes as a workflow beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragraph.dsl import load
from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.config_file import read_config
from ragraph.tune.space import Point, with_quality, workflow_rounds, workflow_topk
from ragraph.tune.tuned import tuned_knobs, tuned_tree, write_tuned

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


def _written(tmp_path: Path, point: Point, workflow: str = "ircot.rag", base=None):
    flat = {"engine": "sim", **tuned_knobs(point, "ragraph")}
    tree = tuned_tree(base or {}, flat)
    return write_tuned(tmp_path / "tuned.toml", tree, point, load(WORKFLOWS / workflow),
                       WORKFLOWS / workflow)


def test_the_file_loads_into_the_same_knobs(tmp_path: Path):
    point = Point(8, 2, 1, "-O0", 16)
    written = _written(tmp_path, point)
    config = RuntimeConfig.of(read_config(written.config))
    assert (config.llm.engine, config.search.nprobe, config.scheduler.passes,
            config.scheduler.concurrency, config.scheduler.executor) == \
           ("sim", 8, "-O0", 16, "ragraph")
    graph = load(written.workflow)
    assert written.workflow == tmp_path / "tuned.rag"
    assert (workflow_topk(graph), workflow_rounds(graph)) == (2, 1)
    assert "ragraph run" in written.config.read_text()


def test_the_workflow_stays_when_its_knobs_did_not_move(tmp_path: Path):
    written = _written(tmp_path, Point(64, 5, None, "-O2", 4), "hyde.rag")
    assert written.workflow == WORKFLOWS / "hyde.rag"
    assert not (tmp_path / "tuned.rag").exists()


def test_the_run_config_file_given_to_tune_is_kept(tmp_path: Path):
    base = {"llm": {"engine": "sim", "profile": "roofline"}, "search": {"hot_fraction": 0.3}}
    written = _written(tmp_path, Point(8, 5, None, "-O2", 4), "hyde.rag", base)
    config = RuntimeConfig.of(read_config(written.config))
    assert (config.llm.profile, config.search.hot_fraction, config.search.nprobe) == \
           ("roofline", 0.3, 8)


def test_a_bad_knob_fails_before_writing(tmp_path: Path):
    with pytest.raises(ConfigError, match="concurrency"):
        tuned_tree({}, {"concurrency": 0})


def test_with_quality_keeps_the_order_of_a_looping_nodes_edges():
    graph = load(WORKFLOWS / "ircot.rag")
    tuned = with_quality(graph, Point(8, 3, 2, "-O2", 4))
    loops = [e.src for e in graph.edges() if e.max_iters]
    for src in loops:
        assert [(e.dst, e.kind) for e in tuned.out_edges(src)] == \
               [(e.dst, e.kind) for e in graph.out_edges(src)]
    assert (workflow_topk(tuned), workflow_rounds(tuned)) == (3, 2)
    assert (workflow_topk(graph), workflow_rounds(graph)) == (4, 3)  # the original untouched


def test_run_serve_and_the_python_api_read_the_same_knobs(tmp_path: Path):
    from ragraph.api.options import runtime_config as api_config
    from ragraph.cli.main import build_parser
    from ragraph.cli.options import runtime_config as cli_config

    written = _written(tmp_path, Point(8, 2, 1, "-O0", 16))
    expected = ("sim", 8, "-O0", 16)
    for argv in (["run", str(written.workflow), "-q", "why?"], ["serve", str(written.workflow)]):
        args = build_parser().parse_args([*argv, "--config", str(written.config)])
        assert _knobs(cli_config(args)) == expected
    assert _knobs(api_config(str(written.config), {})) == expected


def _knobs(config: RuntimeConfig) -> tuple:
    return (config.llm.engine, config.search.nprobe, config.scheduler.passes,
            config.scheduler.concurrency)


def test_intermediate_generations_are_shortened_and_the_answer_is_not():
    graph = load(WORKFLOWS / "hyde.rag")
    tuned = with_quality(graph, Point(8, 5, None, "-O2", 4, gen_share=0.5))
    tokens = {n.id: n.sampling.max_tokens for n in tuned.nodes() if hasattr(n, "sampling")}
    assert tokens == {"hypo": 32, "answer": 24}
    assert with_quality(graph, Point(8, 5, None, "-O2", 4)) == graph


def test_a_shortened_generation_comes_as_a_workflow(tmp_path: Path):
    written = _written(tmp_path, Point(8, 5, None, "-O2", 4, gen_share=0.5), "hyde.rag")
    assert written.workflow == tmp_path / "tuned.rag"
    assert load(written.workflow).node("hypo").sampling.max_tokens == 32


def test_the_release_and_the_budget_reach_run(tmp_path: Path):
    from ragraph.cli.main import build_parser
    from ragraph.cli.options import runtime_config as cli_config

    point = Point(8, 2, 1, "-O0", 16, release="retrieval", budget=2048)
    written = _written(tmp_path, point)
    assert "release=retrieval budget=2048" in written.config.read_text().splitlines()[0]
    args = build_parser().parse_args(["run", str(written.workflow), "-q", "why?", "--config",
                                      str(written.config)])
    config = cli_config(args)
    assert (config.scheduler.release, config.llm.sim_budget) == ("retrieval", 2048)
    # Off the simulated engine the budget is the server's own: none is written.
    knobs = tuned_knobs(Point(8, 2, 1, "-O0", 16, release="step"), "ragraph")
    assert knobs["release"] == "step" and "sim_budget" not in knobs
