"""`--replicas` as users start it: `ragraph run` and `ragraph serve` flags, `[llm] replicas` in a
config file, `ragraph.Runtime(replicas=[...])`. Each builds the router through `replicas_for` over
two real OpenAI-compatible servers on loopback (`SimUpstream`), and requests reach both."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

import ragraph
from ragraph.cli.main import main
from tests.chaos.upstream import SimUpstream
from tests.cli.fake_search import use_fake_search
from tests.runtime.fakes import random_search
from tests.serve.servers import serving_app

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
ONESHOT = WORKFLOWS / "oneshot.rag"
# Questions whose prompts share little: the router spreads them by load, not by prefix.
QUESTIONS = [f"{word} question number {i}?" for i, word in
             enumerate(["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel"])]


@pytest.fixture()
def upstreams() -> Iterator[tuple[SimUpstream, SimUpstream]]:
    with ExitStack() as stack:
        yield stack.enter_context(SimUpstream()), stack.enter_context(SimUpstream())


def both_served(a: SimUpstream, b: SimUpstream) -> None:
    assert a.served > 0 and b.served > 0, (a.served, b.served)


def questions_file(tmp_path: Path) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n"
                           for i, q in enumerate(QUESTIONS)), encoding="utf-8")
    return src


def answered(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("error") for r in rows] == [None] * len(QUESTIONS), rows
    return rows


def test_run_flag_starts_the_router_over_both_servers(upstreams, tmp_path, monkeypatch):
    use_fake_search(monkeypatch)
    a, b = upstreams
    out = tmp_path / "out.jsonl"
    assert main(["run", str(ONESHOT), "--input", str(questions_file(tmp_path)), "--output",
                 str(out), "--engine", "openai", "--replicas", f"{a.url},{b.url}", "-c", "8",
                 "--search-threads", "1"]) == 0
    assert all(r["answer"] for r in answered(out))
    both_served(a, b)


def test_config_file_replicas_start_the_router(upstreams, tmp_path, monkeypatch):
    use_fake_search(monkeypatch)
    a, b = upstreams
    config, out = tmp_path / "run.toml", tmp_path / "out.jsonl"
    config.write_text(f'[llm]\nengine = "openai"\nreplicas = ["{a.url}", "{b.url}"]\n'
                      "[scheduler]\nconcurrency = 8\n", encoding="utf-8")
    assert main(["run", str(ONESHOT), "--config", str(config), "--input",
                 str(questions_file(tmp_path)), "--output", str(out),
                 "--search-threads", "1"]) == 0
    answered(out)
    both_served(a, b)


def test_runtime_keyword_starts_the_router(upstreams):
    a, b = upstreams
    with ragraph.Runtime(engine="openai", replicas=[a.url, b.url], concurrency=8,
                         search_threads=1, search=random_search()) as rt:
        answers = rt.batch(ragraph.load(ONESHOT), QUESTIONS)
    assert len(answers) == len(QUESTIONS) and all(x.answer for x in answers)
    both_served(a, b)


def test_serve_flag_starts_the_router(upstreams, monkeypatch):
    """`ragraph serve oneshot.rag --engine openai --replicas A,B` (the Ray guide's command without
    Ray): the app it builds, served, spreads concurrent requests over both servers."""
    import ragraph.serve
    from ragraph.cli import run_single

    a, b = upstreams
    built = {}
    monkeypatch.setattr(run_single, "open_run", fake_open_run)
    monkeypatch.setattr(ragraph.serve, "run_server",
                        lambda app, settings: built.update(app=app, settings=settings))
    assert main(["serve", str(ONESHOT), "--engine", "openai", "--replicas", f"{a.url},{b.url}",
                 "-c", "8", "--search-threads", "1", "--port", "0"]) == 0
    with serving_app(built["app"], built["settings"]) as served:
        asyncio.run(ask_together(served.url))
    both_served(a, b)


async def fake_open_run(config, err):  # noqa: ANN001, ANN201 - open_run's signature
    return random_search()


async def ask_together(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        responses = await asyncio.gather(*(
            client.post("/runs/wait", json={"workflow": "oneshot", "input": {"question": q}})
            for q in QUESTIONS))
    assert [r.status_code for r in responses] == [200] * len(QUESTIONS), responses[0].text


@pytest.mark.slow  # a local Ray cluster and the real embedder
def test_the_ray_guide_run_command(ray_cluster, upstreams, tmp_path):
    """docs/guides/ray.md's batch: lists on shard actors, the LLM on two servers behind the
    router (`--ray ... --shards ... --engine openai --replicas A,B`)."""
    a, b = upstreams
    corpus, index, out = tmp_path / "corpus.jsonl", tmp_path / "index", tmp_path / "out.jsonl"
    corpus.write_text("".join(json.dumps({"title": f"Topic {i}", "text": f"Fact {i} of the "
                                          f"{word} set."}) + "\n"
                              for i, word in enumerate(["alpha", "bravo", "charlie"] * 8)),
                      encoding="utf-8")
    assert main(["index", "build", "--corpus", str(corpus), "--out", str(index),
                 "--nlist", "4"]) == 0
    assert main(["index", "shard", str(index), "--shards", "2", "--replicate", "0.1"]) == 0
    assert main(["run", str(ONESHOT), "-i", str(questions_file(tmp_path)), "-o", str(out),
                 "--index", str(index), "--ray", "auto", "--shards", "2", "--shard-cpus", "0.25",
                 "--engine", "openai", "--replicas", f"{a.url},{b.url}", "-c", "8",
                 "--nprobe", "4"]) == 0
    answered(out)
    both_served(a, b)
