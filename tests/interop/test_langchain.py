"""ragraph in LangChain and LangGraph apps with the real packages (langchain-core, langgraph) on
the simulated engine over real faiss: the Runnable answers as the Runtime does (invoke, batch,
stream and their async twins), composes with `|`, and drops into a real StateGraph beside the
retriever; the retriever returns exactly the index's top-k as Documents with their origin."""

from __future__ import annotations

import asyncio
import operator
from pathlib import Path
from typing import Annotated, TypedDict

import pytest

import ragraph
from ragraph.errors import ConfigError, RequestFailed, RuntimeClosed
from ragraph.interop.langchain import RagraphRetriever, as_runnable
from tests.runtime.fakes import random_search

pytest.importorskip("langgraph")
from langchain_core.documents import Document  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnableParallel  # noqa: E402

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
SIM = dict(engine="sim", concurrency=16, search_threads=1, nprobe=16)
QUESTIONS = [f"What is notable about topic number {i}?" for i in range(6)]


@pytest.fixture(scope="module")
def rt():
    with ragraph.Runtime(search=random_search(), **SIM) as runtime:
        yield runtime


@pytest.fixture(scope="module")
def hyde(rt):
    return as_runnable(WORKFLOWS / "hyde.rag", rt)


@pytest.fixture(scope="module")
def expected(rt, hyde) -> dict[str, str]:
    return {q: rt.run(hyde.workflow, q).answer for q in QUESTIONS}


def test_invoke_batch_and_stream_answer_as_the_runtime_does(rt, hyde, expected):
    assert hyde.invoke(QUESTIONS[0]) == expected[QUESTIONS[0]]
    assert hyde.invoke({"question": QUESTIONS[1]}) == expected[QUESTIONS[1]]
    before = rt.counters
    assert hyde.batch(QUESTIONS) == [expected[q] for q in QUESTIONS]
    after = rt.counters
    # The batch reached the scheduler together: its requests shared their decode steps.
    tokens = after.completion_tokens - before.completion_tokens
    assert after.decode_steps - before.decode_steps < tokens / 2
    chunks = list(hyde.stream(QUESTIONS[2]))
    assert len(chunks) > 3 and "".join(chunks) == expected[QUESTIONS[2]]


def test_async_twins(hyde, expected):
    async def main():
        one = await hyde.ainvoke(QUESTIONS[3])
        many = await hyde.abatch(QUESTIONS[:3])
        chunks = [c async for c in hyde.astream(QUESTIONS[4])]
        return one, many, chunks

    one, many, chunks = asyncio.run(main())
    assert one == expected[QUESTIONS[3]]
    assert many == [expected[q] for q in QUESTIONS[:3]]
    assert len(chunks) > 3 and "".join(chunks) == expected[QUESTIONS[4]]


def test_a_rewritten_answer_streams_whole_at_the_end(rt):
    irg = as_runnable(WORKFLOWS / "irg.rag", rt)  # the answer node runs three rounds
    chunks = list(irg.stream(QUESTIONS[0]))
    assert chunks == [irg.invoke(QUESTIONS[0])]


def test_errors_are_ragraph_errors(rt, hyde, expected):
    with pytest.raises(ConfigError, match="^input.question: a mapping input needs a question"):
        hyde.invoke({"query": "no question here"})
    with pytest.raises(ConfigError, match="^inputs.tone: workflow 'hyde' has no such input"):
        hyde.invoke({"question": QUESTIONS[0], "tone": "dry"})
    with pytest.raises(ConfigError, match="^question: a question is text"):
        hyde.invoke(42)
    too_long = "word " * 40_000  # over the simulated engine's context
    with pytest.raises(RequestFailed) as failed:
        hyde.invoke(too_long)
    assert failed.value.kind == "input"
    with pytest.raises(RequestFailed):
        list(hyde.stream(too_long))
    answers = hyde.batch([QUESTIONS[0], too_long], return_exceptions=True)
    assert answers[0] == expected[QUESTIONS[0]] and isinstance(answers[1], RequestFailed)
    with pytest.raises(RequestFailed):
        hyde.batch([QUESTIONS[0], too_long])
    with pytest.raises(ConfigError, match="^k: must be an integer"):
        RagraphRetriever(runtime=rt, k=0)
    with pytest.raises(ConfigError, match="^nprobe: must be a positive integer"):
        RagraphRetriever(runtime=rt, nprobe=-1)
    closed = ragraph.Runtime(search=random_search(), **SIM)
    with pytest.raises(RuntimeClosed):
        as_runnable(WORKFLOWS / "hyde.rag", closed).invoke(QUESTIONS[0])


def test_the_retriever_returns_the_index_top_k_as_documents(rt):
    search = random_search()
    retriever = RagraphRetriever(runtime=rt, k=4, nprobe=8)
    docs = retriever.invoke(QUESTIONS[0])
    truth = search.search(QUESTIONS[0], 4, 8)
    assert [d.metadata["id"] for d in docs] == list(truth.ids)
    assert [d.page_content for d in docs] == [p.text for p in truth]
    assert docs[0].metadata == {"id": truth.items[0].id, "title": truth.items[0].title,
                                "score": pytest.approx(truth.items[0].score)}
    many = asyncio.run(retriever.abatch(QUESTIONS[:3]))
    assert [[d.metadata["id"] for d in ds] for ds in many] == [
        list(search.search(q, 4, 8).ids) for q in QUESTIONS[:3]]


def test_lcel_composition(rt, hyde, expected):
    shout = hyde | RunnableLambda(str.upper)
    assert shout.invoke(QUESTIONS[0]) == expected[QUESTIONS[0]].upper()
    both = RunnableParallel(answer=hyde, docs=RagraphRetriever(runtime=rt, k=2))
    out = both.invoke(QUESTIONS[1])
    assert out["answer"] == expected[QUESTIONS[1]]
    assert len(out["docs"]) == 2 and all(isinstance(d, Document) for d in out["docs"])


class State(TypedDict, total=False):
    question: str
    docs: list[Document]
    answer: str
    log: Annotated[list[str], operator.add]


def test_a_langgraph_app_runs_the_runnable_and_the_retriever(rt, hyde, expected):
    from langgraph.graph import END, START, StateGraph

    retriever = RagraphRetriever(runtime=rt, k=3)

    def fetch(state: State) -> State:
        return {"docs": retriever.invoke(state["question"]), "log": ["fetch"]}

    def answer(state: State) -> State:
        return {"answer": hyde.invoke(state["question"]), "log": ["answer"]}

    graph = StateGraph(State)
    graph.add_node("fetch", fetch)
    graph.add_node("answer", answer)
    graph.add_edge(START, "fetch")
    graph.add_edge("fetch", "answer")
    graph.add_edge("answer", END)
    app = graph.compile()
    results = app.batch([{"question": q} for q in QUESTIONS[:4]], {"max_concurrency": 4})
    assert [r["answer"] for r in results] == [expected[q] for q in QUESTIONS[:4]]
    assert all(len(r["docs"]) == 3 and r["log"] == ["fetch", "answer"] for r in results)
    # The runnable as a node of its own: LangGraph calls it with the state, a mapping.
    direct = StateGraph(State)
    direct.add_node("answer", RunnableLambda(lambda s: {"answer": hyde.invoke(s["question"])}))
    direct.add_edge(START, "answer")
    assert direct.compile().invoke({"question": QUESTIONS[5]})["answer"] == expected[QUESTIONS[5]]


def test_documents_carry_their_origin(tmp_path):
    from ragraph.cli.main import main
    from tests.retrieval.tiny_models import tiny_model

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "violin.txt").write_text("The violin is a wooden string instrument played with a "
                                     "bow.\n", encoding="utf-8")
    (docs / "lava.md").write_text("# Lava\n\nLava is molten rock from a volcano.\n",
                                  encoding="utf-8")
    index = tmp_path / "index"
    assert main(["index", "build", "--docs", str(docs), "--out", str(index), "--nlist", "1",
                 "--embedder", str(tiny_model(tmp_path / "model"))]) == 0
    with ragraph.Runtime(engine="sim", index=index, nprobe=1) as mine:
        found = RagraphRetriever(runtime=mine, k=2).invoke("violin bow")
    by_source = {Path(d.metadata["source"]).name: d for d in found}
    violin = by_source["violin.txt"]
    text = (docs / "violin.txt").read_text(encoding="utf-8")
    assert text[violin.metadata["start"]:violin.metadata["end"]] == violin.page_content
    assert set(by_source) == {"violin.txt", "lava.md"}


def test_the_extra_stays_optional():
    import subprocess
    import sys

    check = ("import sys, ragraph, ragraph.api\n"
             "assert 'langchain_core' not in sys.modules\n"
             "sys.modules['langchain_core'] = None  # as if the extra were not installed\n"
             "try:\n"
             "    import ragraph.interop.langchain\n"
             "except ragraph.errors.ConfigError as err:\n"
             "    print(err)\n")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2]).stdout
    assert "pip install 'ragraph[langchain]'" in out


def test_the_retriever_takes_k_mode_and_filter_per_call(tmp_path):
    """On an index of documents (built with its keyword index): `invoke(q, k=1)` returns one,
    a filter keeps only the documents it names, hybrid mode ranks by both."""
    from ragraph.cli.main import main
    from tests.retrieval.tiny_models import tiny_model

    docs = tmp_path / "docs"
    (docs / "notes").mkdir(parents=True)
    (docs / "violin.txt").write_text("The violin is a wooden string instrument played with a "
                                     "bow.\n", encoding="utf-8")
    (docs / "lava.md").write_text("# Lava\n\nLava is molten rock from a volcano.\n",
                                  encoding="utf-8")
    (docs / "notes" / "cello.md").write_text("The cello is a larger string instrument, also "
                                             "played with a bow.\n", encoding="utf-8")
    index = tmp_path / "index"
    assert main(["index", "build", "--docs", str(docs), "--out", str(index), "--nlist", "1",
                 "--embedder", str(tiny_model(tmp_path / "model"))]) == 0
    with ragraph.Runtime(engine="sim", index=index, nprobe=1) as mine:
        retriever = RagraphRetriever(runtime=mine, k=3)
        assert len(retriever.invoke("violin bow")) == 3
        assert len(retriever.invoke("violin bow", k=1)) == 1
        md = retriever.invoke("violin bow", filter={"source": "*.md"})
        assert sorted(Path(d.metadata["source"]).name for d in md) == ["cello.md", "lava.md"]
        folder = retriever.invoke("violin bow", filter={"source": f"{docs / 'notes'}/*"})
        assert [Path(d.metadata["source"]).name for d in folder] == ["cello.md"]
        hybrid = RagraphRetriever(runtime=mine, k=1, mode="hybrid").invoke("molten volcano")
        assert Path(hybrid[0].metadata["source"]).name == "lava.md"
        # A field the store lacks fails that request alone, as the input's fault.
        with pytest.raises(RequestFailed, match="^filter.colour: the passage store has no such"
                           ) as failed:
            retriever.invoke("violin", filter={"colour": "red"})
        assert failed.value.kind == "input"
    assert main(["index", "keywords", str(index)]) == 0  # it has one already: nothing to do
