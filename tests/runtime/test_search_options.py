"""Per-request search options (k, hybrid mode, filters) and a workflow's `mode`: every executor
returns the same passages and answers for them, over real faiss and a real SQLite store with its
keyword index; filtered searches return k passages, all allowed; hybrid ones the fusion of the
dense and keyword rankings."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ragraph import END, START, RAGraph
from ragraph.api.load import compile_catalog
from ragraph.ir.values import Origin
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.engine import SimEngine
from ragraph.runtime.request import Request
from ragraph.runtime.retrieval.options import SearchOptions, SearchSpec, Where, fuse
from ragraph.runtime.retrieval.store import PassageStore, StoredPassage, write_store
from ragraph.runtime.search_service import SearchService
from tests.runtime import fakes
from tests.runtime.test_semantics import FAST, VARIANTS

WORDS = ["river", "mountain", "violin", "comet", "harbour", "glacier", "orchard", "lantern"]


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    """The fakes' random IVF index with a real passage store: text with words to match,
    documents under two folders and two file types."""
    dense = fakes.random_search()
    n = dense.engine.index.ntotal
    path = tmp_path_factory.mktemp("store") / "passages.sqlite"
    write_store(path, (StoredPassage(i, None, f"Title {i}",
                                     f"passage {i} on the {WORDS[i % 8]} and the {WORDS[i % 5]}",
                                     origin=Origin(_source(i), 0, 10)) for i in range(n)))
    store = PassageStore(path)
    yield SearchService(dense.engine, dense.embedder, store, nprobe=dense.nprobe)
    store.close()


def _source(i: int) -> str:
    return f"{'guides' if i % 3 else 'api'}/doc{i % 40}.{'md' if i % 2 else 'txt'}"


def graph(mode: str = "dense", where: dict[str, str] | None = None) -> RAGraph:
    g = RAGraph("ask")
    g.add_input("question")
    g.add_retrieval("search", topk=4, query="question", output="docs", mode=mode, filter=where)
    g.add_generation("answer", prompt="{docs}\nQuestion: {question}\nAnswer:", output="answer",
                     max_tokens=6)
    for a, b in ((START, "search"), ("search", "answer"), ("answer", END)):
        g.add_edge(a, b)
    return g


OPTIONS = [SearchOptions(), SearchOptions(k=2), SearchOptions(mode="hybrid"),
           SearchOptions(k=7, where=Where(source="guides/*.md")),
           SearchOptions(mode="hybrid", where=Where(source="api/*", fields=(("title", "Title 9"),))),
           SearchOptions(k=3, mode="hybrid", where=Where(source="*.txt"))]


def requests() -> list[Request]:
    return [Request(id=f"q{i}", question=f"Where is the {WORDS[i % 8]} near {WORDS[(i + 3) % 8]}?",
                    search=OPTIONS[i % len(OPTIONS)]) for i in range(18)]


async def run(g: RAGraph, search: SearchService, executor: str, passes: str,
              asked: list[Request] | None = None):
    config = RuntimeConfig.of(engine="sim", executor=executor, passes=passes, concurrency=6,
                              budget_ms=0.05)
    async with SimEngine(FAST) as engine:
        return await execute(compile_catalog(g, config.scheduler.passes),
                             requests() if asked is None else asked, config,
                             Services(llm=engine, search=search))


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_every_executor_gives_the_same_passages(search, mode):
    results = {}
    for executor, passes in VARIANTS:
        result = asyncio.run(run(graph(mode), search, executor, passes))
        assert all(o.error is None for o in result.outcomes), [o.error for o in result.outcomes]
        results[(executor, passes)] = {
            o.rid: (o.answer, [(p.id, p.score) for p in o.passages]) for o in result.outcomes}
    reference = results[("sequential", "-O0")]
    for variant, got in results.items():
        assert got == reference, f"{variant} differs from sequential -O0"
    for request in requests():
        spec = request.search.spec(4, mode)
        ids = [pid for pid, _ in reference[request.id][1]]
        assert ids == [p.id for p in search.search(request.question, spec, None)]
        if spec.where is None or spec.where.fields == ():
            assert len(ids) == spec.k  # a filter inside the scan leaves k, not fewer
        if spec.where is not None:
            allowed = set(search.store.allowed_ids(spec.where).tolist())
            assert set(ids) <= allowed


NODE_FILTER = {"source": "guides/*.md"}  # a retrieve node's `filter = "source=guides/*.md"`


def filtered_requests() -> list[Request]:
    """Questions to a node with a filter: most keep it; some change k or the mode, and one in
    four replaces it with its own (as a request's k replaces topk)."""
    options = [SearchOptions(), SearchOptions(k=2), SearchOptions(mode="hybrid"),
               SearchOptions(where=Where(source="api/*"))]
    return [Request(id=f"f{i}", question=f"Where is the {WORDS[(i * 3) % 8]}?",
                    search=options[i % len(options)]) for i in range(12)]


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_a_nodes_filter_gives_the_same_passages_on_every_executor(search, mode):
    results = {}
    for executor, passes in [*VARIANTS, ("langgraph", "-O0")]:
        # langgraph takes no per-request options: the questions that keep the node's alone
        asked = [r for r in filtered_requests() if executor != "langgraph" or r.search.empty]
        result = asyncio.run(run(graph(mode, NODE_FILTER), search, executor, passes, asked))
        assert all(o.error is None for o in result.outcomes), [o.error for o in result.outcomes]
        results[(executor, passes)] = {
            o.rid: (o.answer, [(p.id, p.score) for p in o.passages]) for o in result.outcomes}
    reference = results[("sequential", "-O0")]
    for variant, got in results.items():
        assert got == {rid: reference[rid] for rid in got}, f"{variant} differs"
    node_where = (("source", "guides/*.md"),)
    changed = 0
    for request in filtered_requests():
        spec = request.search.spec(4, mode, node_where)
        ids = [pid for pid, _ in reference[request.id][1]]
        assert ids == [p.id for p in search.search(request.question, spec, None)]
        assert len(ids) == spec.k  # filtered inside the scan: k passages, not fewer
        assert set(ids) <= set(search.store.allowed_ids(spec.where).tolist())
        unfiltered = search.search(request.question, SearchSpec(spec.k, spec.mode), None)
        changed += ids != [p.id for p in unfiltered]
    assert changed  # the node's filter is applied, not only accepted


def test_hybrid_is_the_fusion_of_both_rankings(search):
    question = "Where is the violin near the glacier?"
    spec = SearchSpec(5, "hybrid")
    dense = [p.id for p in search.search(question, 5, None)]
    words = search.store.keyword_ids(question, 5)
    assert [p.id for p in search.search(question, spec, None)] == fuse([dense, words], 5)[0]
    texts = [p.text for p in search.store.lookup(words)]
    assert texts and all(WORDS[2] in t or WORDS[5] in t for t in texts)


def test_filtered_results_are_exact_among_the_allowed(search):
    """The filtered top-k is the unfiltered search over the allowed passages alone."""
    where = Where(source="guides/*.md")
    allowed = search.store.allowed_ids(where)
    vector = search.embed("Where is the comet?")
    probe = search.probe(vector, None)
    got = search.filtered(vector, probe, SearchSpec(6, where=where))
    d, ids = search.engine.search(vector.reshape(1, -1), 400, len(probe))
    keep = np.isin(ids[0], allowed)
    assert np.array_equal(got.ids, ids[0][keep][:6])


def test_a_filter_matching_nothing_or_a_store_without_keywords_is_said(search):
    from ragraph.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^filter: no passage of the index matches "
                       r"\{'source': 'nowhere/\*'\}"):
        search.search("comet", SearchSpec(3, where=Where(source="nowhere/*")), None)
    plain = fakes.random_search()  # an in-memory store: no keyword index, no filters
    with pytest.raises(ConfigError, match="^mode: hybrid search needs a passage store"):
        plain.search("comet", SearchSpec(3, "hybrid"), None)
    with pytest.raises(ConfigError, match="^filter: this passage store"):
        plain.search("comet", SearchSpec(3, where=Where(source="*")), None)
