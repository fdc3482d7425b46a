"""The workflow library: every workflow in workflows/ loads, verifies, compiles, runs end to end
on a simulated engine with a toy index, gives the same answers under every executor, and takes
the route its paper prescribes for each decision the model makes."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from ragraph import dsl
from ragraph.api.load import compile_catalog
from ragraph.ir.nodes import Generate
from ragraph.passes import compile
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.costmodel import GpuCostModel
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine
from ragraph.runtime.request import Request
from tests.runtime import fakes
from tests.workflows import routes
from tests.workflows.scripted import ScriptedEngine

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("adaptive", "flare", "hyde", "ircot", "irg", "multistep", "oneshot", "oneshot_chat",
         "ragfusion", "recomp", "selfrag", "stepback", "subquestions")
# A fast simulated GPU: timing never changes answers, only how long the test takes.
FAST = SimConfig(cost=GpuCostModel(weight_bytes=1e9, step_overhead_s=2e-4), mean_output_tokens=6)
VARIANTS = (("sequential", "-O0"), ("stage-batched", "-O0"), ("ragraph", "-O0"), ("ragraph", "-O2"),
            ("langgraph", "-O0"))
N = 20


def load(name: str):
    return dsl.load(ROOT / "workflows" / f"{name}.rag")


def run(graph, engine, search, executor: str, passes: str, questions: list[str]):
    async def go():
        config = RuntimeConfig.of(engine="sim", executor=executor, passes=passes, concurrency=6,
                                  budget_ms=0.05)
        async with engine:  # an id reused while in flight fails, as on every engine
            requests = [Request(id=f"q{i}", question=q) for i, q in enumerate(questions)]
            services = Services(llm=engine, search=search)
            return await execute(compile_catalog(graph, config.scheduler.passes),
                                 requests, config, services)

    result = asyncio.run(go())
    assert all(o.error is None for o in result.outcomes), [o.error for o in result.outcomes]
    return {o.rid: (o.answer, tuple(o.path)) for o in result.outcomes}


@pytest.fixture(scope="module")
def search():
    return fakes.random_search()


def test_the_thirteen_workflows_are_here():
    assert tuple(sorted(p.stem for p in (ROOT / "workflows").glob("*.rag"))) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_loads_verifies_and_compiles(name):
    text = (ROOT / "workflows" / f"{name}.rag").read_text(encoding="utf-8")
    assert re.search(r"et al\., (19|20)\d\d, \"", text), "the header cites the paper"
    header = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    assert "special tokens" in header, "the header says decisions are prompted, not special tokens"
    graph = load(name)
    graph.verify()
    assert "question" in graph.inputs
    assert any(isinstance(n, Generate) and n.output == "answer" for n in graph.nodes())
    for level in ("-O0", "-O2"):
        compile(graph, level).graph.verify()


@pytest.mark.parametrize("name", NAMES)
def test_prompts_show_the_answer_on_the_cue_line(name):
    """A base model continues a prompt that ends in a bare cue ("Answer:") with a line break, and
    a generation that stops at a line break ("\\n", or "\\n\\n" after a blank line) is then
    empty or starts off its cue; each such prompt carries a worked example whose cue line holds
    its text, so the model writes on the cue line."""
    for node in load(name).nodes():
        if not isinstance(node, Generate) or not any(s.startswith("\n")
                                                     for s in node.sampling.stop):
            continue
        if node.chat:
            continue  # a chat model answers in a turn of its own, not on a cue line
        prompt = node.prompt.text
        last = prompt.rsplit("\n", 1)[-1]
        if last == "":
            continue  # ends in a line break: the text starts a fresh line
        assert last.endswith(":"), f"{name}.{node.id}: prompt ends with {last!r}"
        example = re.compile(rf"^{re.escape(last)} \S", re.MULTILINE)
        assert example.search(prompt), f"{name}.{node.id}: no worked example of {last!r}"


@pytest.mark.parametrize("name", NAMES)
def test_every_executor_gives_the_same_answers_on_the_simulated_engine(name, search):
    graph = load(name)
    questions = [f"What is notable about topic {i}?" for i in range(N)]
    answers = {v: run(graph, SimEngine(FAST), search, *v, questions) for v in VARIANTS}
    reference = answers[VARIANTS[0]]
    assert len(reference) == N
    for variant, got in answers.items():
        assert got == reference, f"{name}: {variant} differs from sequential -O0"


@pytest.mark.parametrize("name", NAMES)
def test_every_executor_gives_the_same_answers_on_every_route(name, search):
    graph = load(name)
    questions = routes.questions(N)
    answers = {v: run(graph, ScriptedEngine(routes.script), search, *v, questions)
               for v in VARIANTS}
    reference = answers[VARIANTS[0]]
    assert all(answer for answer, _ in reference.values()), "every answer is non-empty"
    for variant, got in answers.items():
        assert got == reference, f"{name}: {variant} differs from sequential -O0"


def routes_of(name: str, search) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Question kind -> (answer, the nodes it ran), on the scripted engine."""
    questions = routes.questions(len(routes.KINDS))
    got = run(load(name), ScriptedEngine(routes.script), search, "sequential", "-O0", questions)
    return {kind: (got[f"q{i}"][0], tuple(n for n in got[f"q{i}"][1] if n not in ("START", "END")))
            for i, kind in enumerate(routes.KINDS)}


def test_selfrag_retrieves_critiques_and_chooses(search):
    r = routes_of("selfrag", search)
    assert r["plain"][1] == ("decide", "search", "relevance", "grounded", "support")
    assert r["plain"][0].startswith("documents")
    assert r["lookup-no"][1] == ("decide", "direct")
    assert r["irrelevant"][1] == ("decide", "search", "relevance", "direct")
    assert r["unsupported"][1] == ("decide", "search", "relevance", "grounded", "support", "direct")
    for kind in ("lookup-no", "irrelevant", "unsupported"):
        assert r[kind][0].startswith("memory"), kind


def test_stepback_retrieves_for_the_question_and_its_step_back_question(search):
    r = routes_of("stepback", search)
    assert r["plain"][1] == ("abstract", "search", "background", "answer")
    assert r["plain"][0].startswith("documents")


def test_adaptive_routes_by_complexity(search):
    r = routes_of("adaptive", search)
    assert r["lookup-no"][1] == ("classify", "direct")
    assert r["plain"][1] == ("classify", "search", "single")
    assert r["muddled"][1] == ("classify", "search", "single")  # unknown class: one retrieval
    assert r["several"][1] == ("classify",) + ("hop", "reason") * 4 + ("multi",)


def test_flare_retrieves_only_for_unsure_lookaheads(search):
    r = routes_of("flare", search)
    assert r["plain"] == ("memory 0", ("lookahead",))
    assert r["unsure"][1] == ("lookahead", "search", "regenerate")
    assert r["unsure"][0].startswith("documents")


def test_multistep_loops_while_follow_ups_remain(search):
    r = routes_of("multistep", search)
    assert r["hops-1"][1] == ("ask", "search", "step", "ask", "answer")
    assert r["hops-2"][1] == ("ask",) + ("search", "step", "ask") * 2 + ("answer",)
    assert r["hops-9"][1] == ("ask",) + ("search", "step", "ask") * 2 + ("search", "step",
                                                                          "answer")


def test_ircot_interleaves_until_the_answer_or_four_sentences(search):
    r = routes_of("ircot", search)
    assert r["hops-1"][1] == ("search", "reason", "answer")
    assert r["hops-2"][1] == ("search", "reason") * 2 + ("answer",)
    assert r["hops-9"][1] == ("search", "reason") * 4 + ("answer",)


def test_irg_runs_three_rounds(search):
    r = routes_of("irg", search)
    assert r["plain"][1] == ("search", "answer") * 3


@pytest.mark.parametrize("name,path", [("oneshot", ("search", "answer")),
                                       ("hyde", ("hypo", "search", "answer")),
                                       ("recomp", ("search", "compress", "answer"))])
def test_straight_workflows(name, path, search):
    r = routes_of(name, search)
    assert r["plain"][1] == path
    assert r["plain"][0].startswith("documents")
