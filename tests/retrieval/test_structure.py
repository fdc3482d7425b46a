"""Structure-aware chunking of Markdown: every passage keeps its section's heading path (in the
store and in what run and serve return), no passage is a heading or a code fence alone, code
blocks are cut between lines, and every span stays exact."""

from __future__ import annotations

import pytest

from ragraph.runtime.retrieval.build.chunking import ChunkConfig, Chunker
from ragraph.runtime.retrieval.build.documents import read_document
from ragraph.runtime.retrieval.build.structure import outline, structure_only

from .documents_data import sentences

BOOK = """# Volcano Book

{intro}

## Lava

### Ash

```console
{code}
```

### Crust

{crust}

```
# a comment, not a heading
```

## Planet

{planet}
"""


@pytest.fixture
def book(tmp_path):
    code = "\n".join(f"volcano --ash {i} --lava {i * 7}" for i in range(40))
    path = tmp_path / "book.md"
    path.write_text(BOOK.format(intro=sentences(1, 3), code=code, crust=sentences(2, 6),
                                planet=sentences(3, 2)), encoding="utf-8")
    return read_document(path)


@pytest.fixture
def chunker(tiny_embedder_dir):
    from ragraph.runtime.retrieval.build.ingest import passage_embedder

    return Chunker(passage_embedder(str(tiny_embedder_dir)).spec, ChunkConfig(40, 10), max_seq=64)


def test_the_outline_skips_code_and_nests_by_level(book):
    where = outline(book.text)
    assert where.paths == (("Volcano Book",), ("Volcano Book", "Lava"),
                           ("Volcano Book", "Lava", "Ash"), ("Volcano Book", "Lava", "Crust"),
                           ("Volcano Book", "Planet"))
    assert where.path_at(0) == ("Volcano Book",)
    assert where.path_at(book.text.index("volcano --ash 3")) == ("Volcano Book", "Lava", "Ash")
    assert structure_only("## Lava\n\n### Ash\n\n```console")
    assert not structure_only("## Lava\n\nLava flows.")


def test_no_passage_is_structure_alone_and_each_keeps_its_path(book, chunker):
    chunks = chunker.split(book)
    assert all(book.text[c.start:c.end] == c.text for c in chunks)
    assert not [c.text for c in chunks if structure_only(c.text)]
    for c in chunks:
        assert c.headings == outline(book.text).path_at(c.start)
    code = [c for c in chunks if "--ash" in c.text]
    assert len(code) > 2 and {c.headings for c in code} == {("Volcano Book", "Lava", "Ash")}
    for c in code:  # cut between lines of the code block, never inside one
        assert book.text[c.start - 1] == "\n" and book.text[c.end] == "\n", c.text
    planet = [c for c in chunks if c.headings == ("Volcano Book", "Planet")]
    assert planet and planet[0].text.startswith("## Planet") and planet[0].section == "Planet"
    assert {c.section for c in code} == {"Lava > Ash"}


def test_what_is_embedded_fits_the_model_with_its_section(tmp_path, chunker):
    from ragraph.runtime.retrieval.build.builder import CorpusRecord, passage_text

    long = "volcano " * 30
    path = tmp_path / "deep.md"
    path.write_text(f"# Book\n\n## {long}\n\n### Ash {long}\n\n{sentences(5, 8)}\n",
                    encoding="utf-8")
    doc = read_document(path)
    chunks = chunker.split(doc)
    for c in chunks:
        embedded = passage_text(CorpusRecord(None, doc.title, c.text, section=c.section))
        assert chunker.count(embedded) <= 64 - 2  # the model's sequence less [CLS] and [SEP]
    assert chunks[-1].headings[-1] == f"Ash {long.strip()}"
    assert chunks[-1].section and chunks[-1].section in chunks[-1].headings[-1]


def test_the_store_and_answers_carry_the_heading_path(tmp_path, tiny_embedder_dir, book):
    from ragraph.cli.main import main
    from ragraph.runtime.retrieval.manifest import load_index

    out = tmp_path / "idx"
    assert main(["index", "build", "--docs", book.source, "--out", str(out), "--nlist", "1",
                 "--embedder", str(tiny_embedder_dir), "--chunk-tokens", "40"]) == 0
    loaded = load_index(out)
    passages = loaded.store.lookup(range(loaded.manifest.passages)).items
    paths = {p.origin.headings for p in passages}
    assert ("Volcano Book", "Lava", "Ash") in paths and ("Volcano Book", "Planet") in paths
    ash = next(p for p in passages if p.origin.headings[-1:] == ("Ash",))
    assert ash.to_json()["headings"] == ["Volcano Book", "Lava", "Ash"]


def test_a_store_from_before_heading_paths_still_reads_and_takes_them(tmp_path):
    import sqlite3

    from ragraph.ir.values import Origin
    from ragraph.runtime.retrieval.store import (
        PassageStore,
        StoredPassage,
        add_origin_columns,
        insert_rows,
    )

    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE passages (id INTEGER PRIMARY KEY, doc_id TEXT, title TEXT NOT "
                 "NULL, text TEXT NOT NULL, synthetic INTEGER NOT NULL DEFAULT 0, source TEXT, "
                 'start INTEGER, "end" INTEGER)')
    conn.execute("INSERT INTO passages VALUES (0, NULL, 'T', 'old text', 0, '/a.md', 0, 8)")
    add_origin_columns(conn)
    insert_rows(conn, [StoredPassage(1, None, "T", "new", origin=Origin("/b.md", 0, 3, ("A",)))])
    conn.commit()
    conn.close()
    old, new = PassageStore(path).lookup([0, 1]).items
    assert old.origin == Origin("/a.md", 0, 8) and "headings" not in old.to_json()
    assert new.origin.headings == ("A",)
