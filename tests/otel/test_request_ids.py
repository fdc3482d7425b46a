"""Traces name requests by the caller's id: `ragraph run --input`'s line ids and
`Runtime.run(id=...)` on the spans (`ragraph.request.id`, the runtime's own id beside it) and
on the Chrome trace's request tracks; `ragraph run` runs them under the line ids themselves, the
API's hub under ids of its own."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.proto")

from ragraph.cli.main import main  # noqa: E402
from ragraph.runtime.trace import REQUESTS_PID  # noqa: E402
from tests.cli.fake_search import use_fake_search  # noqa: E402
from tests.otel.receiver import attributes, collector  # noqa: E402
from tests.otel.test_otlp import WORKFLOWS, questions  # noqa: E402

IDS = {"r0", "r1", "r2", "r3"}


@pytest.mark.parametrize("executor", ["ragraph", "langgraph"])
def test_run_input_spans_and_chrome_trace_carry_the_line_ids(tmp_path, monkeypatch, executor):
    """On the wavefront and on the LangGraph app (whose nodes report from worker threads):
    every span of a request carries its line's id, and only that one."""
    use_fake_search(monkeypatch)
    trace = tmp_path / "trace.json"
    with collector() as (url, received):
        code = main(["run", str(WORKFLOWS / "hyde.rag"), "--input", str(questions(tmp_path, 4)),
                     "--output", str(tmp_path / "out.jsonl"), "--engine", "sim", "-c", "4",
                     "--executor", executor, "--otlp", url, "--trace", str(trace)])
    assert code == 0
    spans = received.spans
    roots = {attributes(s)["ragraph.request.id"]: s for s in spans if not s.parent_span_id}
    assert set(roots) == IDS
    # `ragraph run` runs each request under its line's id: no second id beside it.
    assert not [r for r in roots.values() if "ragraph.request.internal_id" in attributes(r)]
    for rid, root in roots.items():
        mine = [s for s in spans if s.trace_id == root.trace_id]
        assert {attributes(s)["ragraph.request.id"] for s in mine} == {rid}
        assert {s.name for s in mine} >= {"generate hypo", "retrieve search", "generate answer"}
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events
              if e["name"] == "thread_name" and e["pid"] == REQUESTS_PID}
    assert tracks == IDS


def test_runtime_run_spans_carry_the_callers_id():
    """`id=` names the request on its spans; without one, the runtime's id is the only one."""
    import ragraph
    from tests.runtime import workflows
    from tests.runtime.fakes import random_search

    with collector() as (url, received):
        with ragraph.Runtime(engine="sim", search=random_search(), otlp=url) as rt:
            named = rt.run(workflows.hyde(), "Who wrote Middlemarch?", id="mine")
            unnamed = rt.run(workflows.hyde(), "What is a glacier?")
    roots = {attributes(s)["input.value"]: attributes(s) for s in received.spans
             if not s.parent_span_id}
    assert named.id == roots["Who wrote Middlemarch?"]["ragraph.request.id"] == "mine"
    assert roots["Who wrote Middlemarch?"]["ragraph.request.internal_id"].startswith("req-")
    plain = roots["What is a glacier?"]
    assert plain["ragraph.request.id"] == unnamed.id and unnamed.id.startswith("req-")
    assert "ragraph.request.internal_id" not in plain
