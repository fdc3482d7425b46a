"""`ragraph index build|info` end to end on a tiny JSONL corpus with the real embedder, and every way
an index directory or corpus can be wrong: exit status 2 and a message naming the file."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from ragraph.cli.main import main
from ragraph.errors import SearchIndexError
from ragraph.runtime.retrieval.build.builder import BuildConfig
from ragraph.runtime.retrieval.embed.embedder import EMBEDDER_DIM, EMBEDDER_NAME
from ragraph.runtime.retrieval.manifest import load_index
from ragraph.runtime.retrieval.store import PassageStore, StoredPassage, write_store

TOPICS = {
    "Volcano": "A volcano is a rupture in the crust of a planet where lava and ash escape.",
    "Violin": "The violin is a wooden string instrument played with a bow.",
    "Photosynthesis": "Photosynthesis lets plants turn light, water and carbon dioxide into sugar.",
    "Chess": "Chess is a board game for two players on a checkered board of 64 squares.",
    "Honey bee": "Honey bees live in colonies and make honey from the nectar of flowers.",
    "Glacier": "A glacier is a persistent body of dense ice that moves under its own weight.",
}


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "tiny.jsonl"
    lines = []
    for n in range(5):
        for title, text in TOPICS.items():
            lines.append(
                json.dumps({"id": f"{title}-{n}", "title": title, "text": f"{text} ({n})"})
            )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def built(tiny_corpus, tmp_path_factory, embedder) -> Path:
    out = tmp_path_factory.mktemp("idx") / "tiny"
    assert (
        main(["index", "build", "--corpus", str(tiny_corpus), "--out", str(out), "--nlist", "4"])
        == 0
    )
    return out


def test_build_then_search_finds_the_topic(built, embedder):
    loaded = load_index(built, EMBEDDER_NAME, EMBEDDER_DIM)
    assert loaded.manifest.passages == 30 and loaded.manifest.nlist == 4
    q = embedder.embed(["Which instrument is played with a bow?"])
    dist, ids = loaded.engine.search(q, 3, 4)
    passages = loaded.store.lookup(ids[0], dist[0])
    assert {p.title for p in passages} == {"Violin"}
    assert passages.items[0].score == pytest.approx(float(dist[0][0]))


def test_info_prints_the_manifest(built, capsys):
    assert main(["index", "info", str(built)]) == 0
    out = capsys.readouterr().out
    assert "passages    30" in out and "ivf-flat, nlist 4, metric ip, dim 384" in out


def run_error(argv, capsys) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def test_bad_corpus_lines_name_file_line_and_field(tmp_path, capsys):
    corpus = tmp_path / "bad.jsonl"
    cases = [
        ('{"title": "a", "text": "ok"}\n{"title": "b"}\n', "bad.jsonl:2: field 'text' is missing"),
        ('{"title": "a", "text": 3}\n', "bad.jsonl:1: field 'text' must be a string"),
        ('\n{"title": "a", "text": "x"\n', "bad.jsonl:2: not valid JSON"),
        ('["title", "text"]\n', "bad.jsonl:1: expected a JSON object"),
        ('{"id": [1], "title": "a", "text": "x"}\n', "bad.jsonl:1: field 'id' must be"),
    ]
    for content, message in cases:
        corpus.write_text(content, encoding="utf-8")
        err = run_error(
            ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "o")], capsys
        )
        assert message in err, err
    err = run_error(
        ["index", "build", "--corpus", str(tmp_path / "none.jsonl"), "--out", "x"], capsys
    )
    assert "none.jsonl: cannot read corpus" in err
    corpus.write_bytes(b"\x1f\x8b\x08\x00binary")
    err = run_error(["index", "build", "--corpus", str(corpus), "--out", "x"], capsys)
    assert "bad.jsonl: not UTF-8 JSONL text" in err


def test_nlist_larger_than_corpus_fails_before_embedding(tiny_corpus, tmp_path, capsys):
    argv = ["index", "build", "--corpus", str(tiny_corpus), "--out", str(tmp_path / "o")]
    err = run_error([*argv, "--nlist", "100"], capsys)
    assert "nlist: 100 clusters for only 30 passages" in err


def test_wrong_directories(tmp_path, capsys):
    assert "index directory does not exist" in run_error(
        ["index", "info", str(tmp_path / "no")], capsys
    )
    assert "manifest.json: missing" in run_error(["index", "info", str(tmp_path)], capsys)
    (tmp_path / "manifest.json").write_text("{not json", encoding="utf-8")
    assert "unreadable manifest" in run_error(["index", "info", str(tmp_path)], capsys)


def copy_index(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def edit_manifest(directory: Path, **changes) -> None:
    path = directory / "manifest.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_mismatched_embedder_and_dimension(built, tmp_path, capsys):
    """Any embedder can build an index, so `info` shows another one's; a manifest whose record
    contradicts itself or the index file, and a query embedder of another model, are errors."""
    other = copy_index(built, tmp_path / "other")
    edit_manifest(other, embedder="intfloat/e5-small-v2")
    err = run_error(["index", "info", str(other)], capsys)
    assert "field 'embedding' names 'sentence-transformers/all-MiniLM-L6-v2'" in err
    assert "'embedder' and 'dim' say 'intfloat/e5-small-v2'" in err
    spec = {"name": "intfloat/e5-small-v2", "dim": 384, "query_prompt": "query: "}
    edit_manifest(other, embedding=spec)
    assert main(["index", "info", str(other)]) == 0
    assert "intfloat/e5-small-v2 (dim 384, cosine, query prompt 'query: ')" in \
        capsys.readouterr().out
    with pytest.raises(SearchIndexError, match="built with embedder 'intfloat/e5-small-v2', "
                       "but queries use 'sentence-transformers/all-MiniLM-L6-v2'"):
        load_index(other, EMBEDDER_NAME, EMBEDDER_DIM)
    edit_manifest(other, embedder=EMBEDDER_NAME, dim=128, embedding={"name": EMBEDDER_NAME,
                                                                     "dim": 128})
    with pytest.raises(SearchIndexError, match="index dimension 128 does not match"):
        load_index(other, EMBEDDER_NAME, EMBEDDER_DIM)
    with pytest.raises(SearchIndexError, match="dim is 384, but manifest.json says 128"):
        load_index(other)


def test_damaged_files(built, tmp_path, capsys):
    broken = copy_index(built, tmp_path / "broken")
    data = (broken / "index.faiss").read_bytes()
    (broken / "index.faiss").write_bytes(data[: len(data) // 2])
    assert "index.faiss: not a readable faiss index" in run_error(
        ["index", "info", str(broken)], capsys
    )
    (broken / "index.faiss").unlink()
    assert "index.faiss: index file is missing" in run_error(["index", "info", str(broken)], capsys)
    changed = copy_index(built, tmp_path / "changed")
    edit_manifest(changed, checksum="0" * 64)
    assert "checksum does not match" in run_error(["index", "info", str(changed)], capsys)
    edit_manifest(changed, passages=31)
    assert "passages is 30, but manifest.json says 31" in run_error(
        ["index", "info", str(changed)], capsys
    )
    store_gone = copy_index(built, tmp_path / "store")
    (store_gone / "passages.sqlite").unlink()
    assert "passage store is missing" in run_error(["index", "info", str(store_gone)], capsys)


def test_store_lookup_order_threads_and_errors(tmp_path):
    rows = [StoredPassage(i, None, f"t{i}", f"text {i}", synthetic=i == 3) for i in range(2000)]
    assert write_store(tmp_path / "s.sqlite", rows) == 2000
    store = PassageStore(tmp_path / "s.sqlite")
    got = store.lookup(np.array([1500, -1, 3, 1500]))
    assert [p.id for p in got] == [1500, 3, 1500] and got.items[1].synthetic
    results = []

    def worker():
        results.append(store.lookup(list(range(0, 2000, 7))).ids)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == tuple(range(0, 2000, 7)) for r in results)
    with pytest.raises(SearchIndexError, match="no passage with id 5000"):
        store.lookup([5000])
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(SearchIndexError, match="junk.sqlite: not a ragraph passage store"):
        PassageStore(tmp_path / "junk.sqlite")


def test_build_config_defaults():
    assert BuildConfig().clusters_for(10_000) == 256
    assert BuildConfig(index_type="flat").clusters_for(500) == 1


def test_builds_from_a_hotpotqa_style_corpus_file(tmp_path, embedder):
    """The shared corpora ({title: [sentences]}) build as they are, no conversion to JSONL."""
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({title: [text, " More about it."]
                                  for title, text in TOPICS.items()}), encoding="utf-8")
    out = tmp_path / "idx"
    assert main(["index", "build", "--corpus", str(corpus), "--out", str(out),
                 "--index-type", "flat"]) == 0
    loaded = load_index(out, EMBEDDER_NAME, EMBEDDER_DIM)
    assert loaded.manifest.passages == len(TOPICS)
    found = loaded.store.lookup([0])
    assert found.items[0].title in TOPICS and "More about it." in found.items[0].text
