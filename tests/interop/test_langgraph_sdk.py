"""`ragraph serve`'s run API with the real langgraph-sdk client and langgraph's RemoteGraph,
against the server `ragraph serve` runs (uvicorn on a loopback port; sim engine, real faiss):
stateless runs wait and stream, assistants list the workflows, and what a stateless server
cannot do (threads, interrupts) is refused naming why."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import httpx
import pytest

from tests.serve.conftest import SIM, graphs, question, reference
from tests.serve.servers import serving

pytest.importorskip("langgraph_sdk")
from langgraph.pregel.remote import RemoteException, RemoteGraph  # noqa: E402
from langgraph_sdk import get_client, get_sync_client  # noqa: E402

NAMES = ("hyde", "irg")


@pytest.fixture(scope="module")
def url():
    with serving(graphs(NAMES), SIM) as served:
        yield served.url


@pytest.fixture(scope="module")
def expected():
    return reference([(w, question(i)) for w in NAMES for i in range(4)])


def test_wait_and_stream_with_the_sdk(url, expected):
    client = get_sync_client(url=url)
    done = client.runs.wait(None, "hyde", input={"question": question(0)})
    assert done["answer"] == expected["hyde", question(0)].answer
    assert done["path"] == ["hypo", "search", "answer", "END"]
    parts = list(client.runs.stream(None, "irg", input={"question": question(1)},
                                    stream_mode=["updates", "values", "messages-tuple"]))
    events = [p.event for p in parts]
    assert events[0] == "metadata" and events[-2:] == ["values", "end"]
    assert parts[-2].data["answer"] == expected["irg", question(1)].answer
    tokens = [p.data for p in parts if p.event == "messages"]
    assert tokens and all(m["type"] == "AIMessageChunk" and meta["langgraph_node"]
                          for m, meta in tokens)
    assert {p.data["node"] for p in parts if p.event == "updates"} >= {"search", "answer"}


def test_the_async_client_batches_its_runs(url, expected):
    async def main():
        client = get_client(url=url)
        return await asyncio.gather(*(client.runs.wait(None, "hyde",
                                                       input={"question": question(i)})
                                      for i in range(4)))

    answers = asyncio.run(main())
    assert [a["answer"] for a in answers] == [expected["hyde", question(i)].answer
                                             for i in range(4)]


def test_remote_graph_invokes_streams_and_runs_inside_a_state_graph(url, expected):
    from langgraph.graph import END, START, StateGraph

    remote = RemoteGraph("hyde", url=url)
    final = remote.invoke({"question": question(2)})
    assert final["answer"] == expected["hyde", question(2)].answer
    chunks = list(remote.stream({"question": question(2)}, stream_mode="messages"))
    answer_text = "".join(m["content"] for m, meta in chunks if meta["langgraph_node"] == "answer")
    assert answer_text.strip() == final["answer"]

    class State(TypedDict, total=False):
        question: str
        answer: str

    parent = StateGraph(State)
    parent.add_node("rag", lambda s: {"answer": remote.invoke({"question": s["question"]})[
        "answer"]})
    parent.add_edge(START, "rag")
    parent.add_edge("rag", END)
    assert parent.compile().invoke({"question": question(3)})["answer"] == expected[
        "hyde", question(3)].answer
    with pytest.raises(RemoteException, match="context length"):
        remote.invoke({"question": "word " * 40_000})


def test_assistants_are_the_workflows_and_threads_are_refused(url):
    client = get_sync_client(url=url)
    assert [a["assistant_id"] for a in client.assistants.search()] == sorted(NAMES)
    assert client.assistants.get("irg")["graph_id"] == "irg"
    with pytest.raises(httpx.HTTPStatusError, match="no workflow named 'nope'"):
        client.assistants.get("nope")
    with pytest.raises(httpx.HTTPStatusError, match="threads are not supported"):
        client.threads.create()
    with pytest.raises(httpx.HTTPStatusError, match="threads are not supported"):
        client.runs.wait("some-thread", "hyde", input={"question": question(0)})
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(None, "hyde", input={"question": question(0)},
                         interrupt_before=["answer"])
    assert "interrupt_before: not supported" in refused.value.response.text
