"""`ragraph run --otlp URL` sends its spans over real OTLP/HTTP to a collector on loopback
(tests/otel/receiver.py decodes them with opentelemetry-proto); without the otel extra,
`--otlp` says how to install it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.proto")

from ragraph.cli.main import main  # noqa: E402
from ragraph.runtime.telemetry.otlp import traces_url  # noqa: E402
from tests.cli.fake_search import use_fake_search  # noqa: E402
from tests.otel.receiver import attributes, collector  # noqa: E402

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


def questions(tmp_path: Path, n: int) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", "question": f"What is thing {i}?"}) + "\n"
                           for i in range(n)), encoding="utf-8")
    return src


def test_run_exports_its_spans_to_a_collector(tmp_path, monkeypatch):
    use_fake_search(monkeypatch)
    with collector() as (url, received):
        code = main(["run", str(WORKFLOWS / "hyde.rag"), "--input", str(questions(tmp_path, 4)),
                     "--output", str(tmp_path / "out.jsonl"), "--engine", "sim",
                     "--otlp", url, "-c", "4"])
    assert code == 0
    assert set(received.paths) == {"/v1/traces"}
    assert {r["service.name"] for r in received.resources} == {"ragraph"}
    spans = received.spans
    roots = {attributes(s)["input.value"]: s for s in spans if not s.parent_span_id}
    assert sorted(roots) == [f"What is thing {i}?" for i in range(4)]
    answers = {json.loads(line)["question"]: json.loads(line)["answer"]
               for line in (tmp_path / "out.jsonl").read_text().splitlines()}
    for question, root in roots.items():
        assert attributes(root)["openinference.span.kind"] == "CHAIN"
        assert attributes(root)["output.value"] == answers[question]
        nodes = sorted((s for s in spans if s.parent_span_id == root.span_id),
                       key=lambda s: s.start_time_unix_nano)
        assert [(s.name, attributes(s)["openinference.span.kind"]) for s in nodes] == [
            ("generate hypo", "LLM"), ("retrieve search", "RETRIEVER"), ("generate answer", "LLM")]
        assert all(s.trace_id == root.trace_id for s in nodes)
        assert root.start_time_unix_nano <= nodes[0].start_time_unix_nano
        assert nodes[-1].end_time_unix_nano <= root.end_time_unix_nano
        answer = attributes(nodes[-1])
        assert answer["llm.token_count.completion"] == answer["gen_ai.usage.output_tokens"] > 0
        assert "retrieval.documents.0.document.content" in attributes(nodes[1])


def test_otlp_without_the_extra_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    use_fake_search(monkeypatch)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # import fails
    code = main(["run", str(WORKFLOWS / "hyde.rag"), "--input", str(questions(tmp_path, 1)),
                 "--output", str(tmp_path / "out.jsonl"), "--engine", "sim",
                 "--otlp", "http://127.0.0.1:9"])
    assert code != 0
    shown = capsys.readouterr()
    assert "otlp" in shown.err and "pip install 'ragraph[otel]'" in shown.err


def test_a_base_url_gains_the_traces_path():
    assert traces_url("http://localhost:4318") == "http://localhost:4318/v1/traces"
    assert traces_url("http://localhost:4318/") == "http://localhost:4318/v1/traces"
    assert traces_url("http://host/otlp/v1/traces") == "http://host/otlp/v1/traces"


def test_serve_exports_each_request_it_answers():
    """`ragraph serve --otlp`: the server's one scheduler run records every request it answers;
    the last batch goes out when the server shuts down."""
    import httpx

    from ragraph.runtime.config import RuntimeConfig
    from tests.runtime import workflows
    from tests.serve.servers import serving

    with collector() as (url, received):
        with serving({"hyde": workflows.hyde()}, RuntimeConfig.of(engine="sim", otlp=url)) as server:
            answers = [httpx.post(server.url + "/runs/wait", timeout=60,
                                  json={"workflow": "hyde", "input": {"question": q}}).json()
                       for q in ("Who wrote Middlemarch?", "What is a glacier?")]
    roots = [attributes(s) for s in received.spans if not s.parent_span_id]
    assert sorted((r["input.value"], r["output.value"]) for r in roots) == sorted(
        (q, a["answer"]) for q, a in zip(("Who wrote Middlemarch?", "What is a glacier?"),
                                         answers, strict=True))
    assert {r["ragraph.request.id"] for r in roots} == {a["run_id"] for a in answers}


def test_the_python_api_takes_otlp_too():
    """`ragraph.Runtime(otlp=URL)`: the API opens the same services, so its requests export."""
    import ragraph
    from tests.runtime import workflows
    from tests.runtime.fakes import random_search

    with collector() as (url, received):
        with ragraph.Runtime(engine="sim", search=random_search(), otlp=url) as rt:
            answer = rt.run(workflows.hyde(), "Who wrote Middlemarch?")
    [root] = [attributes(s) for s in received.spans if not s.parent_span_id]
    assert root["input.value"] == "Who wrote Middlemarch?"
    assert root["output.value"] == answer.answer


def test_closing_does_not_wait_on_a_collector_that_hangs():
    """The collector takes the connection and never answers: closing stops waiting (after its
    bounded wait), says the last spans were dropped, and the run's exit is not held."""
    import socket
    import threading

    from ragraph.runtime.telemetry.otlp import OtlpSpans

    listener = socket.create_server(("127.0.0.1", 0))
    got, release, held = threading.Event(), threading.Event(), []

    def hang() -> None:
        conn, _ = listener.accept()
        held.append(conn)
        got.set()
        release.wait()

    threading.Thread(target=hang, daemon=True).start()
    spans = OtlpSpans(f"http://127.0.0.1:{listener.getsockname()[1]}")
    spans.provider.get_tracer("test").start_span("one").end()
    try:
        exported = spans.close(wait_s=0.5)
        assert exported.abandoned and exported.sent == 0
        assert not release.is_set()  # returned while the collector still held the request
        assert "dropped" in exported.describe()
    finally:
        release.set()
        for conn in held:
            conn.close()
        listener.close()
