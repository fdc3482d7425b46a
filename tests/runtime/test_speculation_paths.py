"""Speculation's two paths, forced, on the exact simulated engine: a generation started on a
retrieval's partial top-k is adopted when the final top-k renders the same prompt, and rolled
back (and started again) when it does not; the answer is -O0's either way. The index is built so
that the path is known: two IVF lists, the query's nearer one searched first (the first step of a
split search), and the final top-k either already in it or in the second list.

Speculative retrieval (a search on a generation's partial text, warming the real search's
cluster order) is forced the same way: HyDE's passage, decoded in chunks, is searched before the
generation ends."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ragraph import END, START, RAGraph
from ragraph.api.load import compile_catalog
from ragraph.runtime.app import RunResult, execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine
from ragraph.runtime.request import Request
from ragraph.runtime.scheduler import policies, speculation_rules
from ragraph.runtime.search_service import SearchService
from ragraph.runtime.trace import Tracer
from tests.runtime import fakes, workflows
from tests.runtime.test_semantics import FAST

DIM = 8
QUERY = np.array([-0.2, 1.0, 0, 0, 0, 0, 0, 0], dtype=np.float32)
# Lists around -e0 and +e0: the query is nearer the first, so a split search scans it first.
CENTROIDS = np.array([[-1.0] + [0.0] * 7, [1.0] + [0.0] * 7], dtype=np.float32)
# The first list's vectors: the partial top-k after its step.
NEAR_LIST = [[-1.0, 0.1 * i, 0.05 * i, 0, 0, 0, 0, 0] for i in range(1, 5)]
# Second-list vectors far from the query: the final top-k is the partial one.
FAR = [[1.0, -1.0 - 0.1 * i, 0, 0, 0, 0, 0, 0] for i in range(4)]
# One vector just across the boundary, nearest the query of all: the top-k changes at the end.
CLOSER = [[0.05, 1.0, 0, 0, 0, 0, 0, 0], *FAR[1:]]


class FixedEmbedder:
    """Every text embeds to QUERY: every retrieval of the test searches the same point."""

    name = "fixed"
    dim = DIM

    def embed(self, texts: Sequence[str], threads: int | None = None) -> np.ndarray:
        return np.repeat(QUERY[None, :], len(texts), axis=0)


def two_lists(second: list[list[float]]) -> SearchService:
    import faiss

    from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine

    quantizer = faiss.IndexFlatL2(DIM)
    quantizer.add(CENTROIDS)
    index = faiss.IndexIVFFlat(quantizer, DIM, 2)
    index.is_trained = True  # the lists are the two centroids given
    index.add(np.array(NEAR_LIST + second, dtype=np.float32))
    assert [index.invlists.list_size(i) for i in range(2)] == [4, len(second)]
    return SearchService(FaissIVFEngine(index, cache_bytes=0), FixedEmbedder(),
                         fakes.MemoryStore(8), nprobe=2)


def retrieve_then_answer() -> RAGraph:
    g = RAGraph("answer")
    g.add_input("question")
    g.add_retrieval("search", topk=2, query="question", output="docs")
    g.add_generation("answer", prompt="{docs}\nQ: {question}\nA:", output="answer",
                     max_tokens=12)
    for a, b in ((START, "search"), ("search", "answer"), ("answer", END)):
        g.add_edge(a, b)
    return g


def run(graph: RAGraph, search: SearchService, passes: str, budget_ms: float | None = 1e-6,
        sim: SimConfig = FAST, requests: int = 1, concurrency: int = 4,
        ) -> tuple[RunResult, Tracer]:
    """`requests` requests (q1, q2, ...); a tiny fixed budget makes each search step take one
    list."""
    config = RuntimeConfig.of(engine="sim", passes=passes, concurrency=concurrency,
                              budget_ms=budget_ms)
    tracer = Tracer()
    asked = [Request(id=f"q{i + 1}", question="Which list holds the answer?")
             for i in range(requests)]

    async def go() -> RunResult:
        async with SimEngine(sim) as engine:
            services = Services(llm=engine, search=search, tracer=tracer)
            return await execute(compile_catalog(graph, passes), asked, config, services)

    return asyncio.run(go()), tracer


def speculation_spans(tracer: Tracer) -> list[tuple[str, str]]:
    return [(s.name, s.args["outcome"]) for s in tracer.spans()
            if s.track == "q1" and s.name.startswith("speculate ")]


def answers(result: RunResult) -> dict[str, tuple]:
    assert all(o.error is None for o in result.outcomes), [o.error for o in result.outcomes]
    return {o.rid: (o.answer, o.path, o.passages.ids) for o in result.outcomes}


def speculated(second: list[list[float]]) -> tuple[RunResult, tuple[int, int, int], list]:
    """The -O2 run over lists (NEAR_LIST, `second`), checked against -O0's answer; its
    speculations (started, adopted, rolled back) and the trace's speculate spans."""
    search = two_lists(second)
    spec, trace = run(retrieve_then_answer(), search, "-O2")
    plain, _ = run(retrieve_then_answer(), search, "-O0")
    assert answers(spec) == answers(plain)
    st = spec.stats
    assert st.speculations_held_back == 0  # one request: nothing settled before it to back off
    return spec, (st.speculations, st.speculation_hits, st.rollbacks), speculation_spans(trace)


def test_speculation_adopt_when_the_partial_top_k_is_the_final_one():
    _, counts, spans = speculated(FAR)
    assert counts == (1, 1, 0)
    assert spans == [("speculate answer", "adopted")]


def test_speculation_rollback_when_the_final_top_k_changes():
    spec, counts, spans = speculated(CLOSER)
    assert counts == (1, 0, 1)
    assert spans == [("speculate answer", "rolled back")]
    # The real generation ran on the final passages (the vector across the boundary first).
    assert spec.outcomes[0].passages.ids[0] == len(NEAR_LIST)


def test_speculation_rollback_answers_differ_from_the_speculated_prompt():
    """The rollback test can tell the paths apart: the prompt the partial top-k renders gives
    another answer than the final one (were the rolled-back instance adopted, it would show)."""
    near, _ = run(retrieve_then_answer(), two_lists(FAR), "-O0")
    closer, _ = run(retrieve_then_answer(), two_lists(CLOSER), "-O0")
    assert near.outcomes[0].answer != closer.outcomes[0].answer


def test_speculation_adopt_and_rollback_need_a_split_search():
    """Whole searches (one step) leave no partial top-k: nothing is speculated, nothing settles."""
    spec, trace = run(retrieve_then_answer(), two_lists(CLOSER), "-O2", budget_ms=1e6)
    assert (spec.stats.speculations, spec.stats.rollbacks) == (0, 0)
    assert speculation_spans(trace) == []


def test_speculation_held_back_while_partial_top_ks_keep_changing():
    """Requests one after another whose final top-k always differs from the partial one: once
    `BACKOFF_MIN_SETTLED` speculations were all rolled back, the retrievals after them ask for
    no partial top-k and start no speculation, except one in `EXPLORE_EVERY`, and every answer
    is -O0's."""
    requests, search = 12, two_lists(CLOSER)
    spec, _ = run(retrieve_then_answer(), search, "-O2", requests=requests, concurrency=1)
    plain, _ = run(retrieve_then_answer(), search, "-O0", requests=requests, concurrency=1)
    assert answers(spec) == answers(plain)
    after = requests - speculation_rules.BACKOFF_MIN_SETTLED
    explored = sum(speculation_rules.explores(i) for i in range(after))
    st = spec.stats
    assert st.speculations_held_back == after - explored
    assert (st.speculations, st.speculation_hits, st.rollbacks) == (
        speculation_rules.BACKOFF_MIN_SETTLED + explored, 0, speculation_rules.BACKOFF_MIN_SETTLED + explored)


@pytest.mark.parametrize("passes, warmed", [("-O2", 1),
                                            ("split-stages,speculate{retrieval=false}", 0)])
def test_speculative_retrieval_warms_the_search_while_the_passage_is_written(passes, warmed):
    """HyDE on an idle engine and search thread: once the passage's first decode chunk is out,
    it is searched (a warm search on the request's track) before the real retrieval starts;
    the answer is -O0's."""
    search, graph = fakes.random_search(), workflows.hyde()
    # Passages as long as HyDE asks for (24 tokens): past the first decode chunk (16).
    sim = replace(FAST, mean_output_tokens=64)
    spec, trace = run(graph, search, passes, budget_ms=None, sim=sim)
    plain, _ = run(graph, search, "-O0", budget_ms=None, sim=sim)
    assert spec.stats.warm_searches == warmed
    spans = {s.name: s for s in trace.spans() if s.track == "q1"}
    assert ("warm search" in spans) == bool(warmed)
    if warmed:
        assert spans["warm search"].start < spans["retrieve search"].start
        assert spans["warm search"].start < spans["generate hypo"].end  # on a partial passage
    assert answers(spec) == answers(plain)


def test_speculative_retrieval_warms_a_search_its_generation_branches_to():
    """multistep asks a follow-up question and searches it unless it says "none": the partial
    question is searched before the branch is decided (a warm search), and the answer is
    -O0's."""
    from ragraph.dsl import load

    graph = load(Path(__file__).resolve().parents[2] / "workflows" / "multistep.rag")
    search, sim = fakes.random_search(), replace(FAST, mean_output_tokens=64)
    spec, trace = run(graph, search, "-O2", budget_ms=None, sim=sim)
    plain, _ = run(graph, search, "-O0", budget_ms=None, sim=sim)
    assert spec.stats.warm_searches >= 1
    assert any(s.name == "warm search" for s in trace.spans() if s.track == "q1")
    assert answers(spec) == answers(plain)


@pytest.mark.parametrize(("concurrency", "speculates"), [(4, False), (8, True)])
def test_no_speculation_into_an_engine_the_retrievals_in_flight_are_about_to_fill(
        concurrency: int, speculates: bool, monkeypatch: pytest.MonkeyPatch):
    """Four requests retrieving at once, none generating yet: at 4 in flight the other three's
    generations fill the stage past tau (0.6 x 4), so none speculates; at 8 it has room. The
    engine's busy share stays unmeasured (the run's first window, whatever this host's speed:
    `policies.speculation_load` counts them only then)."""
    monkeypatch.setattr(policies.BusyMeter, "sample", lambda self, busy_s, now: None)
    result, _ = run(retrieve_then_answer(), two_lists(FAR), "-O2", requests=4,
                    concurrency=concurrency)
    plain, _ = run(retrieve_then_answer(), two_lists(FAR), "-O0", requests=4,
                   concurrency=concurrency)
    assert answers(result) == answers(plain)
    assert (result.stats.speculations > 0) is speculates
