"""The Python API (ragraph/api) on the simulated engine over real faiss (the tests' in-memory
search): sync, async and streamed answers equal to what `ragraph run` computes, calls from many
threads batching in the one scheduler, typed errors, and closing."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import ragraph
from ragraph.api.load import compile_catalog
from ragraph.errors import ConfigError, RequestFailed, RuntimeClosed, WorkflowError
from ragraph.runtime.app import execute, open_services
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.request import Request
from tests.runtime.fakes import random_search

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
SIM = dict(engine="sim", concurrency=16, search_threads=1, nprobe=16)
QUESTIONS = [f"What is notable about topic number {i}?" for i in range(8)]


@pytest.fixture(scope="module")
def hyde():
    return ragraph.load(WORKFLOWS / "hyde.rag")


@pytest.fixture(scope="module")
def expected(hyde) -> dict[str, str]:
    """What `ragraph run --input` answers (its `execute`), by question."""
    config = RuntimeConfig.of(**SIM)

    async def run():
        async with open_services(config, random_search()) as services:
            requests = [Request(id=f"r{i}", question=q) for i, q in enumerate(QUESTIONS)]
            return await execute(compile_catalog(hyde, config.scheduler.passes),
                                 requests, config, services)

    return {o.question: o.answer for o in asyncio.run(run()).outcomes}


def runtime(**options) -> ragraph.Runtime:
    return ragraph.Runtime(search=random_search(), **{**SIM, **options})


def test_run_batch_and_stream_answer_as_ragraph_run_does(hyde, expected):
    with runtime() as rt:
        one = rt.run(hyde, QUESTIONS[0])
        many = rt.batch(hyde, QUESTIONS)
        events = list(rt.stream(hyde, QUESTIONS[1]))
    assert one.answer == expected[QUESTIONS[0]]
    assert [a.answer for a in many] == [expected[q] for q in QUESTIONS]
    assert one.path == ("hypo", "search", "answer", "END")
    assert len(one.passages) > 0 and all(p.title for p in one.passages)
    assert one.usage.prompt_tokens > 0 and one.usage.completion_tokens > 0
    assert one.timings.latency_s > 0 and one.timings.total_s >= one.timings.latency_s
    final = events[-1]
    assert isinstance(final, ragraph.Finished) and final.answer.answer == expected[QUESTIONS[1]]
    tokens = "".join(e.text for e in events if isinstance(e, ragraph.Token) and e.node == "answer")
    assert tokens.strip() == final.answer.answer
    done = [e.node for e in events if isinstance(e, ragraph.NodeCompleted)]
    assert {"hypo", "search", "answer"} <= set(done)


def test_async_twins(hyde, expected):
    async def main():
        async with runtime() as rt:
            one = await rt.arun(hyde, QUESTIONS[2])
            many = await rt.abatch(hyde, QUESTIONS[:3])
            events = [e async for e in rt.astream(hyde, QUESTIONS[3])]
            gathered = await asyncio.gather(*(rt.arun(hyde, q) for q in QUESTIONS[4:]))
        return one, many, events, gathered

    one, many, events, gathered = asyncio.run(main())
    assert one.answer == expected[QUESTIONS[2]]
    assert [a.answer for a in many] == [expected[q] for q in QUESTIONS[:3]]
    assert events[-1].answer.answer == expected[QUESTIONS[3]]
    assert [a.answer for a in gathered] == [expected[q] for q in QUESTIONS[4:]]


def test_threads_calling_run_batch_together_in_one_scheduler(hyde, expected):
    answers: dict[str, str | None] = {}
    with runtime() as rt:
        start = threading.Barrier(len(QUESTIONS))

        def ask(question: str) -> None:
            start.wait()
            answers[question] = rt.run(hyde, question).answer

        threads = [threading.Thread(target=ask, args=(q,)) for q in QUESTIONS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        counters = rt.counters
    assert answers == expected
    # One request at a time would take a forward pass per token; together they share them.
    assert counters.requests == 2 * len(QUESTIONS)  # hypo + answer per request
    assert counters.decode_steps < counters.completion_tokens / 2


def test_bad_options_and_questions_are_typed_errors_naming_the_field(hyde, tmp_path):
    with pytest.raises(ConfigError, match="concurency: not a runtime option .*'concurrency'"):
        ragraph.Runtime(engine="sim", concurency=4)
    with pytest.raises(ConfigError) as err:
        ragraph.Runtime(engine="sim", nprobe=0)
    assert err.value.field == "nprobe"
    bad = tmp_path / "bad.rag"
    bad.write_text("workflow bad\n  nonsense here\n")
    with pytest.raises(WorkflowError, match="bad.rag:"):
        ragraph.load(bad)
    with runtime() as rt:
        with pytest.raises(ConfigError, match="^question: must be a non-empty string"):
            rt.run(hyde, "  ")
        with pytest.raises(ConfigError, match=r"^questions\[1\]: a question is text"):
            rt.batch(hyde, ["fine?", 42])
        with pytest.raises(ConfigError, match="^inputs.tone: workflow 'hyde' has no such input"):
            rt.run(hyde, "fine?", inputs={"tone": "dry"})


def test_a_failing_request_fails_alone(hyde, expected):
    too_long = "word " * 40_000  # over the simulated engine's 32,768-token context
    with runtime() as rt:
        answers = rt.batch(hyde, [QUESTIONS[0], too_long, QUESTIONS[1]])
        with pytest.raises(RequestFailed) as failed:
            rt.run(hyde, too_long)
        after = rt.run(hyde, QUESTIONS[2])
    assert [answers[0].answer, answers[2].answer] == [expected[QUESTIONS[0]],
                                                      expected[QUESTIONS[1]]]
    assert answers[1].answer is None and answers[1].error_kind == "input"
    assert "context" in answers[1].error
    assert failed.value.kind == "input" and failed.value.answer.error == str(failed.value)
    assert after.answer == expected[QUESTIONS[2]]


def test_closing_lets_requests_in_flight_finish_then_refuses_calls(hyde, expected):
    rt = runtime().open()
    first = threading.Event()
    answers: list = []
    batch = threading.Thread(target=lambda: answers.extend(
        rt.batch(hyde, QUESTIONS, on_answer=lambda a: first.set())))
    batch.start()
    first.wait()
    rt.close()
    batch.join()
    assert [a.answer for a in answers] == [expected[q] for q in QUESTIONS]
    with pytest.raises(RuntimeClosed):
        rt.run(hyde, QUESTIONS[0])
    rt.close()  # idempotent


def test_leaving_a_stream_early_cancels_its_request(hyde, expected):
    with runtime() as rt:
        for event in rt.stream(hyde, QUESTIONS[0]):
            if isinstance(event, ragraph.Token):
                break
        assert rt.run(hyde, QUESTIONS[1]).answer == expected[QUESTIONS[1]]
        aborted = rt.counters.aborted
    assert aborted >= 1


def test_one_runtime_runs_several_workflows_and_builder_graphs(hyde, expected):
    oneshot = ragraph.load(WORKFLOWS / "oneshot.rag")
    graph = ragraph.RAGraph("hyde")  # a builder graph with the same name as a .rag one
    graph.add_input("question")
    graph.add_generation("answer", prompt="Answer: {question}", output="answer")
    graph.add_edge(ragraph.START, "answer")
    graph.add_edge("answer", ragraph.END)
    with runtime() as rt:
        a = rt.run(hyde, QUESTIONS[0])
        b = rt.run(oneshot, QUESTIONS[0])
        c = rt.run(graph, QUESTIONS[0])
        again = rt.run(graph, QUESTIONS[1])
    assert a.answer == expected[QUESTIONS[0]]
    assert b.path[-1] == "END" and b.workflow == "oneshot"
    assert c.path == ("answer", "END") and again.path == ("answer", "END")


def test_mapping_questions_keep_their_ids_and_golden_answers(hyde, expected):
    with runtime() as rt:
        answers = rt.batch(hyde, [{"id": "a", "question": QUESTIONS[0], "golden_answers": ["x"]},
                                  QUESTIONS[1]])
    assert answers[0].id == "a" and answers[0].golden_answers == ("x",)
    assert answers[0].to_json()["id"] == "a"
    assert answers[1].id != "a" and answers[1].answer == expected[QUESTIONS[1]]


def test_import_ragraph_stays_cheap():
    import subprocess
    import sys

    code = "import ragraph, sys; print('ragraph.api' in sys.modules, 'faiss' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_ragraph_run_input_gives_the_same_answers(expected, tmp_path, monkeypatch, capsys):
    """`ragraph run --input` runs the same scheduler on its own loop: its lines carry these
    answers."""
    import json

    from ragraph.cli.main import main
    from tests.cli.fake_search import use_fake_search

    use_fake_search(monkeypatch)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n"
                           for i, q in enumerate(QUESTIONS)), encoding="utf-8")
    assert main(["run", str(WORKFLOWS / "hyde.rag"), "--input", str(src), "--output", str(out),
                 "--engine", "sim", "-c", "16", "--search-threads", "1", "--nprobe", "16"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"q{i}" for i in range(len(QUESTIONS))]
    assert [r["answer"] for r in rows] == [expected[q] for q in QUESTIONS]
    assert "clusters searched" in capsys.readouterr().out
