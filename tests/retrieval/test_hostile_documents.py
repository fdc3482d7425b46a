"""A folder as an attacker or a careless user leaves it, built with `index build --docs`: links
in and out of it, loops and dangling links, names and contents that are not UTF-8, runs of
characters without a break, empty files, malformed and bomb PDFs, deep HTML and a FIFO. Nothing
outside the folder is read, no passage is over its budget, every refusal is named, and the index
answers a query."""

from __future__ import annotations

import os
import sqlite3
import zlib
from pathlib import Path

import pytest

from ragraph.cli.main import main
from ragraph.runtime.retrieval.build.chunking import ChunkConfig, Chunker
from ragraph.runtime.retrieval.embed.embedder import query_embedder
from ragraph.runtime.retrieval.manifest import load_index

from .documents_data import sentences, write_markdown, write_text

SECRET = "volcano glacier secretword"
CHUNK = 40


def _bomb_pdf(path: Path) -> None:
    """A one-page PDF whose content stream inflates from ~20 KB to 20 MB of spaces."""
    stream = zlib.compress(b" " * 20_000_000, 9)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream
               + b"\nendstream"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    path.write_bytes(bytes(out))


def hostile_folder(root: Path) -> tuple[Path, Path]:
    """The folder `root/docs` and, beside it, `root/outside` that nothing may read."""
    docs, outside = root / "docs", root / "outside"
    (docs / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET, encoding="utf-8")
    (outside / "more.md").write_text(f"# More\n\n{SECRET}\n", encoding="utf-8")
    write_markdown(docs / "guide.md", 1, "Volcano Guide")
    write_text(docs / "sub" / "notes.txt", 2)
    os.symlink(outside / "secret.txt", docs / "innocent.txt")  # a file link out
    os.symlink(outside, docs / "shared")  # a folder link out
    os.symlink(docs / "guide.md", docs / "sub" / "again.md")  # a link in: read once
    os.symlink(docs, docs / "sub" / "up")  # a loop through a folder
    os.symlink("self.txt", docs / "self.txt")  # a link to itself
    os.symlink("nowhere.txt", docs / "dangling.txt")
    os.mkfifo(docs / "pipe.txt")
    (Path(os.fsdecode(bytes(docs) + b"/caf\xe9.txt"))).write_text(sentences(3, 4))
    (docs / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (docs / "empty.txt").write_bytes(b"")
    (docs / "blank.md").write_text(" \n\t\n \n", encoding="utf-8")
    (docs / "dna.txt").write_text("Sequence of the volcano.\n\n" + "ACGT" * 5_000, encoding="utf-8")
    (docs / "minified.md").write_text("# Code\n\n" + "x=1;" * 200 + "\n", encoding="utf-8")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj garbage")
    _bomb_pdf(docs / "bomb.pdf")
    (docs / "deep.html").write_text("<html><body>" + "<div>" * 3_000 + sentences(4, 3)
                                    + "</div>" * 3_000 + "</body></html>", encoding="utf-8")
    return docs, outside


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, tiny_embedder_dir):
    docs, outside = hostile_folder(tmp_path_factory.mktemp("hostile"))
    out = docs.parent / "idx"
    argv = ["index", "build", "--docs", str(docs), "--out", str(out), "--nlist", "1",
            "--embedder", str(tiny_embedder_dir), "--chunk-tokens", str(CHUNK), "--skip-bad"]
    return docs, outside, out, argv


def test_a_hostile_folder_builds_within_it(hostile, capsys):
    docs, outside, out, argv = hostile
    assert main(argv) == 0
    err = capsys.readouterr().err
    loaded = load_index(out)
    passages = loaded.store.lookup(range(loaded.manifest.passages)).items
    assert all(SECRET not in p.text for p in passages)
    sources = {p.origin.source for p in passages}
    assert all(Path(s).is_relative_to(docs.resolve()) for s in sources)
    assert str(docs / "guide.md") in sources and str(docs / "dna.txt") in sources
    assert str(docs / "sub" / "again.md") not in sources  # read under its real path, once
    chunker = Chunker(loaded.manifest.embedder_spec, ChunkConfig(CHUNK))
    assert max(chunker.count(p.text) for p in passages) <= CHUNK
    assert max(len(p.text) for p in passages) <= chunker.chars
    flat = " ".join(err.split())  # rich wraps long lines
    for named in ("innocent.txt: a symbolic link to", "shared: a symbolic link to",
                  "self.txt: a symbolic link loop", "dangling.txt: a dangling symbolic link",
                  "pipe.txt: not a regular file", "caf\\xe9.txt: its name is not UTF-8",
                  "latin1.txt: not UTF-8 text", "empty.txt: no text in it",
                  "blank.md: no text in it", "broken.pdf: not a readable PDF",
                  "bomb.pdf"):
        assert named in flat, named
    # Off a terminal, each stage logs where it is.
    assert "cutting documents: 0/" in flat and f"embedding passages: {len(passages)}/{len(passages)}" in flat
    embedder = query_embedder(loaded.manifest.embedder_spec)
    _, ids = loaded.engine.search(embedder.embed(["volcano guide"]), 3, 1)
    assert len(loaded.store.lookup(ids[0]).items) == 3


def test_without_skip_bad_a_bad_name_stops_before_embedding(tmp_path, tiny_embedder_dir, capsys,
                                                            monkeypatch):
    from ragraph.runtime.retrieval.embed.embedder import Embedder

    def never(*args, **kwargs):
        raise AssertionError("embedded before every document was checked")

    monkeypatch.setattr(Embedder, "embed", never)
    docs, _ = hostile_folder(tmp_path)
    for bad in ("latin1.txt", "empty.txt", "blank.md", "broken.pdf", "bomb.pdf"):
        (docs / bad).unlink()
    out = tmp_path / "idx"
    argv = ["index", "build", "--docs", str(docs), "--out", str(out), "--nlist", "1",
            "--embedder", str(tiny_embedder_dir)]
    assert main(argv) == 2
    assert "caf\\xe9.txt: its name is not UTF-8" in " ".join(capsys.readouterr().err.split())
    assert not out.exists() and not out.with_name("idx.partial").exists()


def test_links_out_are_read_only_when_asked(tmp_path, tiny_embedder_dir, capsys):
    docs, outside = hostile_folder(tmp_path)
    for name in os.listdir(docs):
        if name not in ("guide.md", "innocent.txt", "shared", "sub"):
            os.remove(os.path.join(docs, name))
    out = tmp_path / "idx"
    argv = ["index", "build", "--docs", str(docs), "--out", str(out), "--nlist", "1",
            "--embedder", str(tiny_embedder_dir), "--follow-links"]
    assert main(argv) == 0
    loaded = load_index(out)
    sources = {p.origin.source for p in loaded.store.lookup(range(loaded.manifest.passages))}
    assert {str(outside / "secret.txt"), str(outside / "more.md")} <= sources
    assert "sub/up: " not in capsys.readouterr().err  # a loop back in is no error, just seen


def test_index_add_refuses_the_same(hostile, tiny_embedder_dir, tmp_path, capsys):
    docs, outside, _, _ = hostile
    out = tmp_path / "idx"
    base = ["--embedder", str(tiny_embedder_dir), "--nlist", "1", "--chunk-tokens", str(CHUNK)]
    assert main(["index", "build", "--docs", str(docs / "guide.md"), "--out", str(out),
                 *base]) == 0
    capsys.readouterr()
    assert main(["index", "add", str(out), "--docs", str(docs), "--skip-bad"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "innocent.txt: a symbolic link to" in err and "caf\\xe9.txt" in err
    manifest = load_index(out).manifest
    with sqlite3.connect(manifest.store_path(out)) as conn:
        texts = [row[0] for row in conn.execute("SELECT text FROM passages")]
    assert len(texts) == manifest.passages and all(SECRET not in t for t in texts)


def test_a_run_without_a_break_is_cut_by_characters(tmp_path, tiny_embedder_dir):
    from ragraph.runtime.retrieval.build.documents import read_document
    from ragraph.runtime.retrieval.build.ingest import passage_embedder

    spec = passage_embedder(str(tiny_embedder_dir)).spec
    chunker = Chunker(spec, ChunkConfig(CHUNK), max_seq=64)
    path = tmp_path / "dna.txt"
    path.write_text("Sequence of the volcano.\n\n" + "ACGT" * 3_001 + "\n\nThe end.",
                    encoding="utf-8")
    doc = read_document(path)
    assert chunker.count("ACGT" * 3_001) == 1  # one [UNK]: tokens alone never cut it
    chunks = chunker.split(doc)
    assert max(len(c.text) for c in chunks) <= chunker.chars == CHUNK * 8
    assert all(doc.text[c.start:c.end] == c.text for c in chunks)
    assert "".join(c.text for c in chunks if "ACGT" in c.text).startswith("ACGT" * 3_001)


def test_links_in_a_folder_are_resolved_and_named(tmp_path):
    from ragraph.runtime.retrieval.build.walk import find_documents

    docs, outside = hostile_folder(tmp_path)
    found = find_documents([docs])
    assert all(f.is_relative_to(docs) for f in found.files)
    assert found.files.count(docs / "guide.md") == 1
    refused = {p.path.name: p.reason for p in found.refused}
    assert refused["innocent.txt"].startswith(f"a symbolic link to {outside / 'secret.txt'}")
    assert refused["shared"].startswith(f"a symbolic link to {outside}")
    assert refused["self.txt"] == "a symbolic link loop"
    assert refused["dangling.txt"] == "a dangling symbolic link (to nowhere.txt)"
    assert refused["pipe.txt"].startswith("not a regular file")
    assert "up" not in refused  # a link back up is inside: seen already, not an error
    followed = find_documents([docs], follow_links=True)
    assert {outside / "secret.txt", outside / "more.md"} <= set(followed.files)
