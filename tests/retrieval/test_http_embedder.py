"""`--embedder-url`: an index built by an OpenAI-compatible embeddings server, queried through it
by run, batched across requests, and every way the server can be the wrong one (another model,
another dimension, down) as one line naming both sides."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest

from ragraph.cli.main import main
from ragraph.errors import EngineError, SearchIndexError
from ragraph.runtime.retrieval.embed.http import (
    PROBE_TEXT,
    HttpEmbedder,
    HttpEmbedderConfig,
)
from ragraph.runtime.retrieval.manifest import Manifest

from .embed_server import bag_of_words, embed_server
from .test_build_cli import TOPICS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "c.jsonl"
    path.write_text("".join(json.dumps({"id": f"{t}-{n}", "title": t, "text": f"{x} ({n})"}) + "\n"
                            for n in range(4) for t, x in TOPICS.items()), encoding="utf-8")
    return path


def build(corpus: Path, out: Path, url: str, *extra: str) -> int:
    return main(["index", "build", "--corpus", str(corpus), "--out", str(out), "--nlist", "2",
                 "--embedder-url", url, *extra])


def run(index: Path, url: str | None, questions: list[str], tmp: Path, *extra: str) -> list[dict]:
    src, out = tmp / "q.jsonl", tmp / "a.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "question": q}) + "\n"
                           for i, q in enumerate(questions)), encoding="utf-8")
    argv = ["run", str(ROOT / "workflows" / "oneshot.rag"), "--engine", "sim", "--index",
            str(index), "--nprobe", "2", "-i", str(src), "-o", str(out), *extra]
    assert main(argv + (["--embedder-url", url] if url else [])) == 0
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_build_and_run_through_an_embeddings_server(corpus, tmp_path):
    with embed_server() as server:
        assert build(corpus, tmp_path / "idx", server.url, "--query-prompt", "find: ") == 0
        spec = Manifest.read(tmp_path / "idx").embedder_spec
        assert (spec.name, spec.dim, spec.source) == ("bag-of-words-64", 64, "openai-http")
        assert spec.query_prompt == "find: " and spec.passage_prompt == ""
        server.batches.clear()
        questions = ["Which wooden instrument is played with a bow?",
                     "What game is played on a board of 64 squares?",
                     "Which insects make honey from flowers?"] * 3
        answers = run(tmp_path / "idx", server.url, questions, tmp_path, "-c", "9")
    expected = ["Violin", "Chess", "Honey bee"] * 3
    # The corpus holds each topic 4 times: they are the top 4 of 5.
    assert [{p["title"] for p in a["passages"][:4]} for a in answers] == [{t} for t in expected]
    batches = [b for b in server.batches if b != [PROBE_TEXT]]  # the dimension check at open
    # The index's query prompt goes in front of every query, and the wavefront batches them.
    assert sorted(t for b in batches for t in b) == sorted("find: " + q for q in questions)
    assert len(batches) < len(questions)


def test_the_server_batches_at_most_batch_size_texts_and_keeps_their_order():
    texts = [f"text number {i} about {w}" for i, w in enumerate(["lava", "ice", "chess"] * 30)]
    with embed_server() as server:
        embedder = HttpEmbedder(HttpEmbedderConfig(server.url, batch_size=32, query_prompt="q: "))
        server.batches.clear()
        vectors = embedder.embed(texts)
        embedder.close()
    assert [len(b) for b in server.batches] == [32, 32, 26]
    expected = np.asarray([bag_of_words("q: " + t, 64) for t in texts], dtype=np.float32)
    assert np.abs(vectors - expected).max() < 1e-6
    assert vectors.dtype == np.float32 and vectors.shape == (90, 64)


def test_a_server_of_another_model_or_dimension_is_one_line_naming_both(corpus, tmp_path,
                                                                       capsys):
    with embed_server() as server:
        assert build(corpus, tmp_path / "idx", server.url) == 0
    capsys.readouterr()
    args = ["run", str(ROOT / "workflows" / "oneshot.rag"), "--engine", "sim", "--index",
            str(tmp_path / "idx"), "-q", "what is lava?", "--embedder-url"]
    with embed_server(model="other-model") as other:
        assert main([*args, other.url]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "built with embedder 'bag-of-words-64'" in err and "'other-model'" in err
    with embed_server(dim=48) as narrow:
        assert main([*args, narrow.url]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "64-dimensional vectors of 'bag-of-words-64'" in err and "answers 48" in err


def test_a_local_index_queried_through_a_server_of_another_model(tmp_path):
    """An index built with the local default embedder (its manifest written here, no model
    needed) and a server of another model: the mismatch names both."""
    from ragraph.runtime.app import index_embedder
    from ragraph.runtime.config import RuntimeConfig

    _minilm_manifest(tmp_path)
    with embed_server(model="bge-small-en-v1.5", dim=384) as server, \
            pytest.raises(SearchIndexError) as caught:
        index_embedder(tmp_path, RuntimeConfig.of(engine="sim", embedder_url=server.url).search)
    message = str(caught.value)
    assert "sentence-transformers/all-MiniLM-L6-v2" in message
    assert "'bge-small-en-v1.5'" in message and "\n" not in message


def _minilm_manifest(directory: Path) -> None:
    from ragraph.runtime.retrieval.embed.spec import MINILM

    Manifest(embedder=MINILM.name, dim=MINILM.dim, metric="ip", nlist=1, index_type="flat",
             passages=0, checksum="0", embedding=MINILM).write(directory)


def test_a_server_that_is_down_says_so_with_its_url(corpus, tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert build(corpus, tmp_path / "idx", url) == 2
    err = capsys.readouterr().err
    assert f"embeddings server {url} cannot be reached" in err and "is it running?" in err
    assert not (tmp_path / "idx").exists()


def test_a_server_that_goes_down_fails_the_call_as_an_engine_error():
    with embed_server() as server:
        embedder = HttpEmbedder(HttpEmbedderConfig(server.url))
    with pytest.raises(EngineError, match="embeddings server http://127.0.0.1"):
        embedder.embed(["what is lava?"])


def test_the_model_name_comes_from_the_answer_when_the_server_lists_none():
    with embed_server(list_models=False, model="tei-model") as server:
        embedder = HttpEmbedder(HttpEmbedderConfig(server.url + "/v1/"))
        assert embedder.name == "tei-model" and embedder.dim == 64
        named = HttpEmbedder(HttpEmbedderConfig(server.url, model="asked-for"))
        assert named.name == "asked-for" and server.models_asked[-1] == "asked-for"
