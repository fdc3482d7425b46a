"""`ragraph serve --ray` as a user starts it, in its own process, on the local 3-node cluster: a
tiny index built with the real embedder, its lists on two shard actors, two Ray Serve replicas of
the server on the simulated engine. Through Serve's proxy: the probes, the models, chat
completions with the official client (whole and streamed) and streamed runs, every answer and
its passages those `ragraph run` gives on one node; SIGTERM stops the server. Replicas that cannot
start fail the command. Without Ray, or with Ray but not Ray Serve, `serve --ray` names the extra
to install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from ragraph.cli.main import main
from tests.llm.conftest import free_port
from tests.processes import stop
from tests.serve.servers import sse_events

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / "workflows"
TOPICS = {
    "Eiffel Tower": "The Eiffel Tower in Paris was designed by the company of Gustave Eiffel.",
    "Violin": "The violin is a wooden string instrument played with a bow.",
    "Glacier": "A glacier is a persistent body of dense ice that moves under its own weight.",
    "Chess": "Chess is a board game for two players on a checkered board of 64 squares.",
}
QUESTIONS = ("Who designed the Eiffel Tower?", "What is played with a bow?",
             "What is a glacier?", "How many squares has a chess board?")
SIM = ("--engine", "sim", "--search-threads", "1")


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("serve-ray")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"title": t, "text": f"{x} ({n})"}) + "\n"
                              for n in range(8) for t, x in TOPICS.items()), encoding="utf-8")
    out = root / "index"
    assert main(["index", "build", "--corpus", str(corpus), "--out", str(out), "--nlist",
                 "4"]) == 0
    return out


def run_on_one_node(workflow: str, index: Path, tmp_path: Path) -> dict[str, tuple]:
    """{question: (answer, passage ids)} as `ragraph run --input` gives them, without Ray."""
    src, out = tmp_path / f"{workflow}.in.jsonl", tmp_path / f"{workflow}.out.jsonl"
    src.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n"
                           for i, q in enumerate(QUESTIONS)), encoding="utf-8")
    assert main(["run", str(WORKFLOWS / f"{workflow}.rag"), "--input", str(src), "--output",
                 str(out), "--index", str(index), *SIM]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return {r["question"]: (r["answer"], [p["id"] for p in r["passages"]]) for r in rows}


@contextmanager
def serve_on_ray(address: str, index: Path, *argv: str) -> Iterator[tuple[str, Path]]:
    port = free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"ragraph-serve-ray-{port}.log"
    command = [sys.executable, "-m", "ragraph.cli.main", "serve", str(WORKFLOWS / "hyde.rag"),
               str(WORKFLOWS / "oneshot.rag"), "--ray", address, "--index", str(index),
               "--port", str(port), *SIM, *argv]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        deadline = time.monotonic() + 300
        while "serving on" not in log.read_text():  # said once every replica is up
            if proc.poll() is not None:
                pytest.fail(f"serve --ray exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"serve --ray did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)  # another process's log: it offers no event
        yield f"http://127.0.0.1:{port}", log
    finally:
        code = stop(proc, timeout_s=120)
    assert code == 0, log.read_text()[-3000:]


def test_serve_on_ray_answers_as_run_on_one_node(ray_cluster, index, tmp_path):
    openai = pytest.importorskip("openai")
    from ray import serve

    hyde, oneshot = (run_on_one_node(w, index, tmp_path) for w in ("hyde", "oneshot"))
    with serve_on_ray(ray_cluster.address, index, "--shards", "2", "--shard-cpus", "0.25",
                      "--serve-replicas", "2", "--serve-cpus", "0.5") as (url, log):
        deployment = serve.status().applications["ragraph"].deployments["ragraph-server"]
        assert deployment.replica_states.get("RUNNING") == 2
        assert httpx.get(url + "/ok").json() == {"ok": True}
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        assert sorted(m.id for m in client.models.list()) == ["hyde", "oneshot"]
        for q in QUESTIONS:
            reply = client.chat.completions.create(
                model="hyde", messages=[{"role": "user", "content": q}])
            passages = [p["id"] for p in reply.model_extra["ragraph"]["passages"]]
            assert (reply.choices[0].message.content, passages) == hyde[q]
            assert reply.system_fingerprint == "ragraph-sim-SIMULATED"
            with httpx.stream("POST", url + "/runs/stream", timeout=60, json={
                    "workflow": "oneshot", "input": {"question": q}}) as response:
                events = sse_events(response)
            assert [e for e, _ in events][0] == "metadata" and events[-1][0] == "end"
            end = events[-1][1]
            assert (end["answer"], [p["id"] for p in end["passages"]]) == oneshot[q]
        chunks = client.chat.completions.create(
            model="hyde", stream=True, messages=[{"role": "user", "content": QUESTIONS[0]}])
        deltas = [c.choices[0].delta.content or "" for c in chunks if c.choices]
        assert len(deltas) > 1 and "".join(deltas) == hyde[QUESTIONS[0]][0]
    assert "stopping" in log.read_text()
    with pytest.raises(httpx.ConnectError):  # Serve, its proxies with it, is gone
        httpx.get(url + "/ok", timeout=5)


def test_replicas_that_cannot_start_fail_the_command(ray_cluster, index):
    """A replica whose engine cannot open: Serve gives up after its retries, the command says
    so, exits 2 and leaves nothing behind (no application, no proxy on the port)."""
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "ragraph.cli.main", "serve", str(WORKFLOWS / "oneshot.rag"),
         "--ray", ray_cluster.address, "--index", str(index), "--port", str(port),
         "--engine", "llamacpp", "--model", str(index / "no-such-model.gguf"), "--shards", "1",
         "--shard-cpus", "0.25", "--serve-cpus", "0.5"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "the Ray Serve replicas did not start" in done.stderr
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/ok", timeout=5)


def test_serve_ray_without_ray_names_the_extra(monkeypatch, tmp_path, capsys):
    pytest.importorskip("starlette")
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code = main(["serve", str(WORKFLOWS / "oneshot.rag"), "--ray", "auto", "--index",
                 str(tmp_path), *SIM])
    assert code == 2
    err = capsys.readouterr().err
    assert "--ray" in err and 'pip install "ragraph[ray]"' in err


def test_serve_ray_without_ray_serve_names_the_extra(monkeypatch, tmp_path, capsys):
    pytest.importorskip("starlette")
    ray = pytest.importorskip("ray")
    import ragraph.serve

    # Ray without its serve extra: `from ray import serve` raises ImportError.
    monkeypatch.setitem(sys.modules, "ray.serve", None)
    monkeypatch.delattr(ray, "serve", raising=False)
    monkeypatch.delitem(sys.modules, "ragraph.serve.on_ray", raising=False)
    monkeypatch.delattr(ragraph.serve, "on_ray", raising=False)
    code = main(["serve", str(WORKFLOWS / "oneshot.rag"), "--ray", "auto", "--index",
                 str(tmp_path), *SIM])
    assert code == 2
    err = capsys.readouterr().err
    assert "Ray Serve" in err and 'pip install "ragraph[ray]"' in err


def test_serve_replicas_without_ray_are_refused(capsys):
    pytest.importorskip("starlette")
    code = main(["serve", str(WORKFLOWS / "oneshot.rag"), "--serve-replicas", "2", *SIM])
    assert code == 2 and "--serve-replicas" in capsys.readouterr().err
