"""The compiled graph is what runs: the wavefront's executed units are the compiled graph's
nodes, and each of the six passes changes the executed schedule but not the answers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragraph import dsl
from ragraph.api.load import compile_catalog
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START
from ragraph.passes import compile
from ragraph.program.interpret import HANDLERS, Interpreter, UnitInterpreter
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.costmodel import GpuCostModel
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine
from ragraph.runtime.request import Request
from ragraph.runtime.scheduler.units import Units
from ragraph.runtime.trace import Tracer
from tests.passes import graphs
from tests.runtime import fakes
from tests.workflows import routes
from tests.workflows.scripted import ScriptedEngine

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("adaptive", "flare", "hyde", "ircot", "irg", "multistep", "oneshot", "ragfusion", "recomp",
         "selfrag", "stepback", "subquestions")
FAST = SimConfig(cost=GpuCostModel(weight_bytes=1e9, step_overhead_s=2e-4), mean_output_tokens=6)


@pytest.fixture(scope="module")
def search():
    return fakes.random_search()


def run(workflow, engine, search, passes: str, questions: list[str], tau: float = 0.6,
        services_search=None):
    """Answers, paths and the trace of one wavefront run."""
    tracer = Tracer()

    async def go():
        config = RuntimeConfig.of(engine="sim", passes=passes, concurrency=6, budget_ms=0.05,
                                  tau=tau)
        async with engine:
            requests = [Request(id=f"q{i}", question=q) for i, q in enumerate(questions)]
            services = Services(llm=engine, search=services_search or search, tracer=tracer)
            return await execute(compile_catalog(workflow, config.scheduler.passes),
                                 requests, config, services)

    result = asyncio.run(go())
    assert all(o.error is None for o in result.outcomes), [o.error for o in result.outcomes]
    return {o.rid: (o.answer, o.path) for o in result.outcomes}, tracer


def units(tracer: Tracer) -> list[str]:
    spans = sorted((s for s in tracer.spans() if s.name.startswith("unit ")),
                   key=lambda s: (s.track, s.start, s.end))
    return [s.name.removeprefix("unit ") for s in spans]


@pytest.mark.parametrize("name", NAMES)
def test_the_executed_units_are_exactly_the_compiled_graphs_nodes(name, search):
    workflow = dsl.load(ROOT / "workflows" / f"{name}.rag")
    compiled = compile(workflow, "-O2")
    _, tracer = run(compiled, ScriptedEngine(routes.script), search, "-O2",
                    routes.questions(2 * len(routes.KINDS)))
    control = {n.id for n in compiled.graph.nodes() if n.in_control_flow} - {END}
    assert set(units(tracer)) == control


@pytest.mark.parametrize("passes", ["-O0", "-O2"])
def test_every_shipped_retrieval_feeds_a_generation_and_a_search_only_one_does_not(passes):
    """What the search side's budget asks: whether finishing a retrieval early can start a
    generation of its request (see RetrievalSide._budget_ms)."""
    for name in NAMES:
        program = compile(dsl.load(ROOT / "workflows" / f"{name}.rag"), passes).program
        assert program.retrievals and all(c.feeds_generation
                                          for c in program.retrievals.values()), name
    g = RAGraph("search-only")
    g.add_input("question")
    g.add_retrieval("search", topk=3, query="question", output="docs")
    g.add_edge(START, "search")
    g.add_edge("search", END)
    program = compile(g, passes).program
    assert [c.feeds_generation for c in program.retrievals.values()] == [False]


def schedules(workflow, search, without: str, with_: str, tau: float = 0.6, engine=None,
              questions=None, services_search=None):
    questions = questions or [f"What is notable about topic {i}?" for i in range(8)]
    runs = [run(workflow, engine() if engine else SimEngine(FAST), search, spec, questions,
                tau, services_search) for spec in (without, with_)]
    (a, trace_a), (b, trace_b) = runs
    assert a == b, "a pass changed answers"
    return units(trace_a), units(trace_b), trace_b


def irg():
    return dsl.load(ROOT / "workflows" / "irg.rag")


def test_split_stages_runs_sub_stages_instead_of_whole_nodes(search):
    before, after, _ = schedules(irg(), search, "-O0", "split-stages")
    assert set(before) == {"START", "search", "answer"}
    assert {"search.embed", "search.probe", "search.search", "search.commit", "answer.prefill",
            "answer.decode", "answer.finish"} <= set(after) and "search" not in after


def test_reorder_consults_the_local_cache_before_later_searches(search):
    before, after, _ = schedules(irg(), search, "split-stages", "split-stages,reorder")
    assert "search.cache" not in before and "search.cache" in after


def test_speculate_adds_verify_points_and_declined_speculation_keeps_answers(search):
    before, after, _ = schedules(irg(), search, "split-stages", "split-stages,speculate",
                                 tau=0.01)  # speculation declined: only the verify points run
    assert "answer.verify" not in before and "answer.verify" in after


def test_rewire_starts_independent_work_before_its_control_predecessor_ends(search):
    def overlapped(trace: Tracer) -> bool:
        by_name = {(s.track, s.name): s for s in trace.spans()}
        return any(by_name[(t, "unit style.prefill")].start < by_name[(t, "unit kw.finish")].end
                   for t, n in by_name if n == "unit kw.finish")

    base = "split-stages"
    before, after, trace = schedules(graphs.parallel(), search, base, base + ",rewire")
    assert "kw.prefill.fork" in after and "answer.finish.join" in after
    assert "kw.prefill.fork" not in before
    assert overlapped(trace)


def test_prefetch_loads_clusters_while_the_query_is_generated(search):
    from ragraph.runtime.retrieval.tier.hotcache import HotCacheConfig, HotClusterCache
    from ragraph.runtime.retrieval.tier.tiered import TieredEngine
    from ragraph.runtime.search_service import SearchService

    def tiered(room: int) -> SearchService:
        cache = HotClusterCache(search.engine, HotCacheConfig(capacity=16, prefetch_capacity=room,
                                                              device="cpu"))
        return SearchService(TieredEngine(search.engine, cache), search.embedder, search.store,
                             nprobe=search.nprobe)

    before, after, _ = schedules(irg(), search, "split-stages", "split-stages,prefetch",
                                 services_search=tiered(16))
    assert "answer.prefetch" not in before and "answer.prefetch" in after
    # With no room to load into, the prefetch unit (and the embedding it costs) is skipped.
    _, full, _ = schedules(irg(), search, "split-stages", "split-stages,prefetch",
                           services_search=tiered(0))
    assert "answer.prefetch" not in full


def test_prefix_layout_hands_the_engine_the_document_segments(search):
    seen: list = []

    class Recording(SimEngine):
        def _submit(self, request, stream):
            seen.append(request.layout)
            super()._submit(request, stream)

    schedules(irg(), search, "split-stages", "split-stages,prefix-layout",
              engine=lambda: Recording(FAST))
    with_layout = [layout for layout in seen if layout is not None]
    assert with_layout and len(with_layout) < len(seen)  # only the prefix-layout run has them
    assert all(0 < s.static_end <= s.docs_end for s in with_layout)


def test_the_wavefront_and_the_walkers_share_what_each_unit_kind_does():
    """One base says what each unit kind does; the wavefront's units and the async walker
    override only how engine calls are issued (the wavefront's merge also records the passages
    it merged, as the baselines' run_unit does)."""
    assert issubclass(Units, UnitInterpreter) and issubclass(Interpreter, UnitInterpreter)
    for method in set(HANDLERS.values()) - {"merge"}:
        assert getattr(Units, method) is getattr(UnitInterpreter, method), method
        assert getattr(Interpreter, method) is getattr(UnitInterpreter, method), method


@pytest.mark.parametrize("passes", ["-O0", "-O2"])
def test_a_generation_leads_to_a_search_where_its_request_searches_after_it(passes):
    """What the engine order asks (`policies.order_for_engine`): HyDE's passage and IRG's
    answers in its loop come before a search; an answer at the end does not."""
    def leads(name: str) -> dict[str, bool]:
        program = compile(dsl.load(ROOT / "workflows" / f"{name}.rag"), passes).program
        return {o: c.leads_to_search for o, c in program.generations.items()}

    assert leads("hyde") == {"hypo": True, "answer": False}
    assert set(leads("oneshot").values()) == {False}
    assert True in leads("irg").values()
