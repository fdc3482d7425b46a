"""The run API (LangGraph's `/runs/stream` and `/runs/wait`), the workflow listing with its
compiled graph, the probes and the Prometheus metrics, with httpx."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ragraph.ir.serialize import from_dict
from tests.serve.conftest import question, reference
from tests.serve.servers import sse_events


def test_runs_wait_answers_with_path_passages_usage_and_timings(server):
    q = question(11)
    want = reference([("irg", q)])[("irg", q)]
    body = httpx.post(server.url + "/runs/wait", timeout=60,
                      json={"workflow": "irg", "input": {"question": q}}).json()
    assert body["answer"] == want.answer
    assert body["path"] == list(want.outcome.path)
    assert [p["id"] for p in body["passages"]] == list(want.outcome.passages.ids)
    assert body["usage"]["prompt_tokens"] == want.prompt_tokens
    assert body["timings"]["latency_s"] >= body["timings"]["first_token_s"] > 0
    assert body["run_id"].startswith("req-") and body["served_by"] == "ragraph-sim-SIMULATED"


def test_runs_stream_sends_metadata_node_updates_and_end(server):
    q = question(12)
    want = reference([("hyde", q)])[("hyde", q)]
    with httpx.stream("POST", server.url + "/runs/stream", timeout=60,
                      json={"assistant_id": "hyde", "input": {"question": q},
                            "stream_mode": ["updates", "messages"]}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response)
    names = [name for name, _ in events]
    assert names[0] == "metadata" and names[-1] == "end"
    run_id = events[0][1]["run_id"]
    updates = [data for name, data in events if name == "updates"]
    # One update per workflow node, in order, each with what it assigned.
    assert [u["node"] for u in updates] == [n for n in want.outcome.path if n != "END"]
    docs = next(u["outputs"]["docs"] for u in updates if u["node"] == "search")
    assert [d["id"] for d in docs] == list(want.outcome.passages.ids)
    assert all(set(d) == {"id", "title"} for d in docs)
    answer_text = "".join(d["text"] for name, d in events
                          if name == "messages" and d["node"] == "answer")
    assert answer_text.strip() == want.answer
    end = events[-1][1]
    assert end["run_id"] == run_id and end["answer"] == want.answer
    assert set(end["timings"]) == {"latency_s", "first_token_s", "scheduler_s"}


def test_runs_stream_units_mode_sends_every_compiled_unit(server):
    with httpx.stream("POST", server.url + "/runs/stream", timeout=60,
                      json={"workflow": "oneshot", "input": {"question": question(1)},
                            "stream_mode": "units"}) as response:
        units = [d["unit"] for name, d in sse_events(response) if name == "units"]
    listing = httpx.get(server.url + "/workflows/oneshot").json()["graph"]
    compiled = {n["id"] for n in listing["nodes"]}
    assert set(units) - {"START"} <= compiled  # START is not in the JSON node list
    assert len(units) >= 5  # sub-stages, not just the two nodes


def test_workflow_json_carries_the_compiled_graph_and_its_drawing(server):
    listed = httpx.get(server.url + "/workflows").json()["workflows"]
    assert {w["name"] for w in listed} == {"oneshot", "hyde", "irg", "multistep"}
    hyde = httpx.get(server.url + "/workflows/hyde").json()
    assert hyde["passes"] != "-O0" and hyde["streams_answer_from"] == ["answer"]
    graph = from_dict(hyde["graph"])  # the JSON reads back as the compiled graph
    assert str(graph) == hyde["listing"]
    assert 'data-node="search.commit"' in hyde["drawing"] and "<svg" in hyde["drawing"]
    missing = httpx.get(server.url + "/workflows/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]


def test_probes(server):
    assert httpx.get(server.url + "/ok").json() == {"ok": True}
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok" and health["simulated"] is True
    assert httpx.get(server.url + "/readiness").status_code == 200


def test_metrics_in_prometheus_format(server):
    httpx.post(server.url + "/runs/wait", json={"workflow": "hyde",
                                                "input": {"question": question(2)}}, timeout=60)
    httpx.post(server.url + "/runs/wait", content=b"{", timeout=10,
               headers={"Content-Type": "application/json"})
    text = httpx.get(server.url + "/metrics").text
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("ragraph_requests_total", (("status", "ok"), ("workflow", "hyde")))] >= 1
    assert samples[("ragraph_rejected_requests_total", (("code", "400"),))] >= 1
    assert samples[("ragraph_request_latency_seconds_count", (("workflow", "hyde"),))] >= 1
    assert samples[("ragraph_time_to_first_token_seconds_count", (("workflow", "hyde"),))] >= 1
    assert samples[("ragraph_engine_simulated", ())] == 1
    assert samples[("ragraph_engine_completion_tokens_total", ())] > 0
    for name in ("ragraph_queue_depth", "ragraph_requests_in_flight",
                 "ragraph_prefix_cache_hit_rate", "ragraph_engine_prompt_tokens_total",
                 "ragraph_engine_cached_tokens_total"):
        assert (name, ()) in samples
