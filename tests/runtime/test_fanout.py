"""Maps at run time: under every executor and every pass combination the two fan-out workflows
give the -O0 answers, passages and paths; the wavefront puts a map's branches into shared search
steps, the sequential baseline runs them one after another; speculation on fused partial
results keeps answers; empty lists and branch counts follow the model's output."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragraph import dsl
from ragraph.passes import compile
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.costmodel import GpuCostModel
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine
from ragraph.runtime.request import Request
from ragraph.runtime.scheduler.fanout import Fan
from ragraph.runtime.scheduler.jobs import Job, Stage
from ragraph.runtime.trace import Tracer
from tests.passes.test_properties import SPECS
from tests.runtime import fakes
from tests.workflows import routes
from tests.workflows.scripted import ScriptedEngine

ROOT = Path(__file__).resolve().parents[2]
FANOUT = ("ragfusion", "subquestions")
FAST = SimConfig(cost=GpuCostModel(weight_bytes=1e9, step_overhead_s=2e-4), mean_output_tokens=8)
QUESTIONS = [f"What is notable about topic {i}?" for i in range(8)]


@pytest.fixture(scope="module")
def search():
    return fakes.random_search()


def run(name: str, search, executor: str = "ragraph", passes: str = "-O0", engine=None,
        questions=QUESTIONS, tau: float = 0.6):
    """(answer, path, final passage ids) by request, the run's stats and its trace."""
    tracer = Tracer()
    engine = engine or SimEngine(FAST)

    async def go():
        config = RuntimeConfig.of(engine="sim", executor=executor, passes=passes, concurrency=6,
                                  budget_ms=0.05, tau=tau)
        async with engine:
            services = Services(llm=engine, search=search, tracer=tracer)
            requests = [Request(id=f"q{i}", question=q) for i, q in enumerate(questions)]
            workflow = compile(dsl.load(ROOT / "workflows" / f"{name}.rag"), passes)
            return await execute(workflow, requests, config, services)

    result = asyncio.run(go())
    assert all(o.error is None for o in result.outcomes), [o.error for o in result.outcomes]
    answers = {o.rid: (o.answer, o.path, o.passages.ids if o.passages else ())
               for o in result.outcomes}
    return answers, result.stats, tracer


@pytest.mark.parametrize("name", FANOUT)
def test_every_pass_combination_gives_the_o0_answers(name, search):
    reference, _, _ = run(name, search, "sequential")
    for spec in ("-O0", *SPECS):
        got, _, _ = run(name, search, "ragraph", spec)
        assert got == reference, f"{name}: ragraph {spec} differs from sequential -O0"
    for executor in ("stage-batched", "langgraph"):
        assert run(name, search, executor)[0] == reference, f"{name}: {executor} differs"


@pytest.mark.parametrize("name", FANOUT)
def test_branches_of_a_map_share_search_steps_in_the_wavefront(name, search):
    _, stats, _ = run(name, search, "ragraph", "-O2")
    assert stats.shared_steps > 0
    assert stats.branch_searches > stats.fan_steps


def test_stage_batched_searches_every_branch_of_every_request_in_one_batch(search):
    _, _, tracer = run("ragfusion", search, "stage-batched", engine=ScriptedEngine(routes.script),
                       questions=routes.questions(4))  # plain 3 queries, none, 3, 3
    batches = [s.name for s in tracer.spans() if s.track == "search"]
    assert batches == ["batch x9"]


def test_the_sequential_baseline_runs_branches_one_after_another(search):
    _, _, tracer = run("subquestions", search, "sequential",
                       engine=ScriptedEngine(routes.script), questions=routes.questions(1))
    spans = sorted((s for s in tracer.spans() if s.track == "q0" and "solve[" in s.name),
                   key=lambda s: s.start)
    assert [s.name for s in spans] == ["generate solve[0]", "generate solve[1]",
                                       "generate solve[2]"]
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))


def test_speculation_on_fused_partial_results_keeps_the_answers(search):
    reference, _, _ = run("ragfusion", search, "ragraph", "-O0")
    got, stats, _ = run("ragfusion", search, "ragraph", "-O2", tau=1.0)
    assert stats.speculations > 0
    assert got == reference


def test_branch_counts_follow_the_list_the_model_wrote(search):
    engine = ScriptedEngine(routes.script)
    questions = routes.questions(len(routes.KINDS))
    got, _, _ = run("subquestions", search, "ragraph", "-O2", engine=engine, questions=questions)
    solved = [p for p in engine.prompts if "full sentence" in p]
    for i, kind in enumerate(routes.KINDS):
        expected = 0 if kind == "lookup-no" else min(routes.hops(questions[i]), 3)
        assert sum(f"of {questions[i]}" in p for p in solved) == expected, kind
    assert got["q1"][2] == ()  # no sub-questions: nothing retrieved


def test_an_empty_list_fuses_to_no_documents(search):
    got, _, _ = run("ragfusion", search, "ragraph", "-O2", engine=ScriptedEngine(routes.script),
                    questions=routes.questions(2))
    assert got["q0"][0].startswith("documents") and got["q1"][0].startswith("memory")


def test_a_fan_completes_a_stage_when_every_branch_has():
    jobs = [Job(key=i, req=None, started=0.0) for i in range(3)]  # type: ignore[arg-type]
    fan = Fan(jobs)
    assert not fan.wait("x.search", Stage.SEARCHED)
    assert jobs[0].reach(Stage.SEARCHED) is None and jobs[2].reach(Stage.SEARCHED) is None
    assert jobs[1].reach(Stage.SEARCHED) == "x.search"
    assert Fan([]).wait("y.decode", Stage.DECODED)  # an empty list: done at once
