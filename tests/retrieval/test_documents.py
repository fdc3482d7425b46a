"""`ragraph index build --docs`: each file kind read with its title, passages cut by the
embedder's tokens with offsets that point at their text, the origin returned with every passage
(store, run's JSON, serve's values), and every bad file named."""

from __future__ import annotations

import sqlite3

import pytest

from ragraph.cli.main import main
from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.retrieval.build.chunking import ChunkConfig, Chunker
from ragraph.runtime.retrieval.build.documents import DocumentError, read_document
from ragraph.runtime.retrieval.embed.embedder import query_embedder
from ragraph.runtime.retrieval.manifest import load_index
from ragraph.runtime.retrieval.store import PassageStore

from .documents_data import write_folder, write_html, write_markdown, write_pdf, write_text


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    docs = tmp_path_factory.mktemp("docs") / "mine"
    write_folder(docs, range(4))
    write_folder(docs / "deeper", range(4, 8))
    (docs / "photo.png").write_bytes(b"\x89PNG\r\n")
    return docs


@pytest.fixture(scope="module")
def built(folder, tiny_embedder_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("idx") / "mine"
    argv = ["index", "build", "--docs", str(folder), "--out", str(out), "--nlist", "2",
            "--embedder", str(tiny_embedder_dir), "--chunk-tokens", "40", "--overlap", "16"]
    assert main(argv) == 0
    return out


def test_each_kind_has_its_title_and_text(tmp_path):
    cases = {
        write_text(tmp_path / "plain notes.txt", 1): ("plain notes", "text"),
        write_markdown(tmp_path / "g.md", 2, "Volcano Guide"): ("Volcano Guide", "markdown"),
        write_html(tmp_path / "p.html", 3, "Chess Page"): ("Chess Page", "html"),
        write_pdf(tmp_path / "x.pdf", 4, "Glacier Paper"): ("Glacier Paper", "pdf"),
    }
    for path, (title, kind) in cases.items():
        doc = read_document(path)
        assert (doc.title, doc.kind, doc.source) == (title, kind, str(path))
        assert len(doc.text.split()) > 30
    html = read_document(tmp_path / "p.html").text
    assert "hidden" not in html and "color" not in html  # script and style are not text
    md = tmp_path / "g.md"
    assert read_document(md).text == md.read_text(encoding="utf-8")


def test_offsets_point_at_each_passage_in_its_document(built, folder):
    loaded = load_index(built)
    passages = loaded.store.lookup(range(loaded.manifest.passages))
    assert {p.origin.source for p in passages} == {
        str(p.resolve()) for p in folder.rglob("*") if p.suffix != ".png" and p.is_file()}
    for p in passages:
        doc = read_document(__import__("pathlib").Path(p.origin.source))
        assert doc.text[p.origin.start:p.origin.end] == p.text
        assert p.title == doc.title
    files = [p for p in passages if p.origin.source.endswith((".txt", ".md"))]
    for p in files:  # text and Markdown: offsets into the file itself
        raw = open(p.origin.source, encoding="utf-8").read()
        assert raw[p.origin.start:p.origin.end] == p.text


def test_passages_fit_the_chunk_and_neighbours_overlap(built, tiny_embedder_dir):
    loaded = load_index(built)
    m = loaded.manifest
    assert (m.chunk_tokens, m.chunk_overlap) == (40, 16)
    chunker = Chunker(m.embedder_spec, ChunkConfig(40, 16))
    passages = loaded.store.lookup(range(m.passages))
    assert max(chunker.count(p.text) for p in passages) <= 40
    by_doc: dict[str, list] = {}
    for p in passages:
        by_doc.setdefault(p.origin.source, []).append(p.origin)
    spans = [sorted((o.start, o.end) for o in origins) for origins in by_doc.values()]
    assert any(a[1] > b[0] for s in spans for a, b in zip(s, s[1:], strict=False))  # overlap


def test_search_returns_each_passage_with_its_origin(built):
    loaded = load_index(built)
    target = loaded.store.lookup([5]).items[0]
    embedder = query_embedder(loaded.manifest.embedder_spec)
    dist, ids = loaded.engine.search(embedder.embed([f"{target.title}. {target.text}"]), 3, 2)
    found = loaded.store.lookup(ids[0], dist[0]).items[0]
    assert found.id == 5 and found.origin == target.origin
    assert found.to_json()["source"] == target.origin.source
    assert {"source", "start", "end"} <= found.to_json(text=False).keys()


def test_a_store_without_origins_still_reads(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE passages (id INTEGER PRIMARY KEY, doc_id TEXT, title TEXT NOT "
                 "NULL, text TEXT NOT NULL, synthetic INTEGER NOT NULL DEFAULT 0)")
    conn.execute("INSERT INTO passages VALUES (0, NULL, 'T', 'old text', 0)")
    conn.commit()
    conn.close()
    (p,) = PassageStore(path).lookup([0]).items
    assert (p.text, p.origin) == ("old text", None)
    assert p.to_json() == {"id": 0, "title": "T", "text": "old text"}


def test_bad_files_are_named(tmp_path, tiny_embedder_dir, capsys):
    docs = tmp_path / "docs"
    write_folder(docs, range(2))
    (docs / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj garbage")
    with pytest.raises(DocumentError, match="broken.pdf: not a readable PDF"):
        read_document(docs / "broken.pdf")
    with pytest.raises(DocumentError, match=r"latin1.txt: not UTF-8 text \(byte 3"):
        read_document(docs / "latin1.txt")
    out = tmp_path / "idx"
    base = ["index", "build", "--out", str(out), "--nlist", "1", "--embedder",
            str(tiny_embedder_dir)]
    assert main([*base, "--docs", str(docs)]) == 2
    assert "broken.pdf: not a readable PDF" in capsys.readouterr().err
    assert not out.exists()
    assert main([*base, "--docs", str(docs), "--skip-bad"]) == 0
    err = capsys.readouterr().err
    assert "skipped" in err and "broken.pdf" in err and "latin1.txt" in err
    assert main([*base, "--docs", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: no such file or folder" in capsys.readouterr().err
    (tmp_path / "x.png").write_bytes(b"\x89PNG")
    assert main([*base, "--docs", str(tmp_path / "x.png")]) == 2
    assert "x.png: not a document kind ragraph reads" in capsys.readouterr().err


def test_chunk_sizes_are_checked_against_the_model(tiny_embedder_dir, tmp_path):
    from ragraph.runtime.retrieval.build.ingest import passage_embedder

    spec = passage_embedder(str(tiny_embedder_dir)).spec
    with pytest.raises(ConfigError, match="chunk_tokens: 100 tokens do not fit"):
        Chunker(spec, ChunkConfig(100), max_seq=64)
    with pytest.raises(ConfigError, match="overlap: must be below chunk_tokens"):
        Chunker(spec, ChunkConfig(32, 32), max_seq=64)
    assert Chunker(spec, max_seq=64).tokens == 62  # 64 less [CLS] and [SEP]
    long_title = write_markdown(tmp_path / "t.md", 1, "volcano " * 60)
    with pytest.raises(SearchIndexError, match="its title"):
        Chunker(spec, max_seq=64).split(read_document(long_title))
