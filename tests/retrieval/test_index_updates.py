"""`ragraph index add|delete`: an index changed in place equals a fresh build of the same
documents, readers see one version or the other while it changes, and what cannot be done is
an error that leaves the index as it was."""

from __future__ import annotations

import json
import shutil
import threading

import numpy as np
import pytest

from ragraph.cli.main import main
from ragraph.errors import SearchIndexError
from ragraph.runtime.retrieval.build.builder import BuildConfig
from ragraph.runtime.retrieval.build.ingest import add_documents, build_index, delete_documents
from ragraph.runtime.retrieval.build.update import LOCK_FILE, Balance
from ragraph.runtime.retrieval.embed.embedder import query_embedder
from ragraph.runtime.retrieval.manifest import Manifest, Training, load_index

from .documents_data import write_folder, write_text

faiss = pytest.importorskip("faiss")


@pytest.fixture
def library(tmp_path, tiny_embedder_dir):
    """Documents 0-7 indexed; documents 8-9 written but not yet in; the queries: every
    passage's own text."""
    docs = tmp_path / "docs"
    write_folder(docs, range(10))
    first = sorted(docs.iterdir())
    later = [p for p in first if "-8." in p.name or "-9." in p.name]
    start = [p for p in first if p not in later]
    out = tmp_path / "idx"
    build_index(start, out, embedder=str(tiny_embedder_dir), config=BuildConfig(nlist=4))
    return out, start, later


def _origins(loaded, ids):
    return [loaded.store.lookup([i]).items[0].origin for i in ids if i >= 0]


def _queries(loaded) -> np.ndarray:
    embedder = query_embedder(loaded.manifest.embedder_spec)
    rows = loaded.store.lookup(sorted(_all_ids(loaded)))
    return embedder.embed([f"{p.title}. {p.text}" for p in rows])


def _all_ids(loaded) -> set[int]:
    ivf = faiss.read_index(str(loaded.manifest.index_path(loaded.directory)))
    return {int(i) for c in range(ivf.nlist) for i in
            faiss.rev_swig_ptr(ivf.invlists.get_ids(c), ivf.invlists.list_size(c))}


def test_add_and_delete_equal_a_fresh_build(library, tmp_path, tiny_embedder_dir):
    out, start, later = library
    deleted = start[2]
    add_documents(out, later)
    report = delete_documents(out, sources=[deleted])
    assert report.deleted > 0 and report.manifest.version == 2
    final = [p for p in start if p != deleted] + later
    fresh = tmp_path / "fresh"
    build_index(final, fresh, embedder=str(tiny_embedder_dir), config=BuildConfig(nlist=4))
    changed, rebuilt = load_index(out), load_index(fresh)
    assert changed.manifest.passages == rebuilt.manifest.passages
    # The same passages, cut and stored alike (ids differ: the changed index counts on).
    def rows(loaded):
        return sorted((p.origin.source, p.origin.start, p.origin.end, p.title, p.text)
                      for p in loaded.store.lookup(sorted(_all_ids(loaded))))
    assert rows(changed) == rows(rebuilt)
    # Searching every list (the centroids differ: the changed index keeps its trained ones),
    # both return the same passages in the same order with the same scores.
    queries = _queries(rebuilt)
    d1, i1 = changed.engine.search(queries, 5, 4)
    d2, i2 = rebuilt.engine.search(queries, 5, 4)
    for a, b in zip(i1, i2, strict=True):
        assert _origins(changed, a) == _origins(rebuilt, b)
    np.testing.assert_allclose(d1, d2, atol=1e-5)
    # At nprobe 1 it equals the same trained quantizer filled afresh with the final vectors:
    # every vector sits in its nearest centroid's list, none is left behind by a delete.
    ivf = faiss.read_index(str(changed.manifest.index_path(out)))
    again = faiss.clone_index(ivf)
    again.reset()
    for c in range(ivf.nlist):  # IVF-Flat codes are the float32 vectors themselves
        n = ivf.invlists.list_size(c)
        ids = faiss.rev_swig_ptr(ivf.invlists.get_ids(c), n).copy()
        codes = faiss.rev_swig_ptr(ivf.invlists.get_codes(c), n * ivf.code_size).copy()
        again.add_with_ids(codes.view(np.float32).reshape(n, ivf.d), ids)
    ivf.nprobe = again.nprobe = 1
    assert np.array_equal(ivf.search(queries, 5)[1], again.search(queries, 5)[1])


def test_adding_a_document_again_replaces_it(library):
    out, start, _ = library
    before = load_index(out).manifest
    notes = write_text(next(p for p in start if p.suffix == ".txt"), 99)  # edited
    report = add_documents(out, [notes])
    assert report.replaced == (str(notes),)
    loaded = load_index(out)
    texts = [p for p in loaded.store.lookup(sorted(_all_ids(loaded)))
             if p.origin.source == str(notes)]
    assert texts and min(p.id for p in texts) >= before.first_free_id
    assert all(notes.read_text()[p.origin.start:p.origin.end] == p.text for p in texts)
    assert loaded.manifest.passages == before.passages - report.deleted + report.added


def test_readers_see_the_old_or_the_new_version(library):
    out, start, later = library
    versions = {0: _sources(load_index(out))}
    held = load_index(out)  # a reader that opened before every change (serve, a run)
    held_queries = _queries(held)[:3]
    held_answer = held.engine.search(held_queries, 3, 4)
    done = threading.Event()
    seen: list[tuple[int, frozenset]] = []
    failures: list[BaseException] = []

    def reader():
        while not done.is_set() or not seen:
            try:
                loaded = load_index(out)
                seen.append((loaded.manifest.version, _sources(loaded)))
                loaded.store.close()
            except BaseException as err:  # noqa: BLE001 - reported below
                failures.append(err)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    add_documents(out, later[:1])
    versions[1] = _sources(load_index(out))
    delete_documents(out, sources=[start[1]])
    versions[2] = _sources(load_index(out))
    add_documents(out, later[1:])
    versions[3] = _sources(load_index(out))
    done.set()
    thread.join()
    assert not failures, failures
    assert seen and all(sources == versions[v] for v, sources in seen)
    again = held.engine.search(held_queries, 3, 4)
    assert np.array_equal(again[1], held_answer[1])
    for i in held_answer[1].reshape(-1):
        held.store.lookup([int(i)])  # its store still answers for its own version


def _sources(loaded) -> frozenset:
    return frozenset((p.id, p.origin.source) for p in loaded.store.lookup(
        sorted(_all_ids(loaded))))


def test_a_failed_change_leaves_the_index_as_it_was(library):
    out, start, _ = library
    def files():
        return sorted(p.name for p in out.iterdir() if p.name != LOCK_FILE)

    before = files()
    with pytest.raises(SearchIndexError, match="holds no documents from .*nowhere.md"):
        delete_documents(out, sources=[start[0].parent / "nowhere.md"])
    with pytest.raises(SearchIndexError, match="holds no passages with ids 999"):
        delete_documents(out, ids=[0, 999])
    with pytest.raises(SearchIndexError, match="without passages"):
        delete_documents(out, sources=[start[0].parent])
    assert files() == before
    assert load_index(out).manifest.version == 0


def test_cli_add_and_delete_report_balance(library, tmp_path, capsys):
    out, start, later = library
    assert main(["index", "add", str(out), "--docs", *map(str, later)]) == 0
    err = capsys.readouterr().err
    assert "added" in err and "version 1" in err and "imbalance" in err
    assert main(["index", "delete", str(out), "--ids", "0", "1"]) == 0
    assert "deleted 2 passages" in capsys.readouterr().err
    assert main(["index", "info", str(out)]) == 0


def test_an_index_from_before_versions_takes_changes(library, tmp_path):
    out, _, later = library
    old = tmp_path / "old"
    shutil.copytree(out, old)
    manifest = json.loads((old / "manifest.json").read_text())
    for key in ("version", "next_id", "training", "chunk_tokens", "chunk_overlap"):
        manifest.pop(key)
    (old / "manifest.json").write_text(json.dumps(manifest))
    assert Manifest.read(old).version == 0 and Manifest.read(old).first_free_id > 0
    report = add_documents(old, later)
    assert report.manifest.version == 1 and report.balance.trained.changed == report.added


def test_retrain_advice():
    trained = Training(passages=1000, imbalance=1.2)
    assert Balance(10, 150, 100.0, 1.3, trained).retrain is None
    assert "uneven" in Balance(10, 400, 100.0, 1.9, trained).retrain
    moved = Training(passages=1000, imbalance=1.2, changed=500)
    assert "500 passages added or deleted" in Balance(10, 150, 100.0, 1.3, moved).retrain


def _keyword_index(loaded) -> set[int]:
    import sqlite3

    conn = sqlite3.connect(loaded.manifest.store_path(loaded.directory))
    try:
        return {r[0] for r in conn.execute("SELECT rowid FROM passages_fts")}
    finally:
        conn.close()


def test_keywords_stay_in_step_and_an_old_index_gets_them(library, tmp_path, capsys):
    """The keyword index holds exactly the index's passages after every add and delete; an
    index built before it gets it from `ragraph index keywords` (a new version)."""
    import sqlite3

    out, start, later = library
    add_documents(out, later)
    delete_documents(out, sources=[start[1]])
    loaded = load_index(out)
    assert _keyword_index(loaded) == _all_ids(loaded)
    loaded.store.close()
    old = tmp_path / "old"
    shutil.copytree(out, old)
    conn = sqlite3.connect(Manifest.read(old).store_path(old))
    for name in ("passages_fts_insert", "passages_fts_delete"):
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("DROP TABLE passages_fts")
    conn.commit()
    conn.close()
    before = load_index(old)
    with pytest.raises(SearchIndexError, match="ragraph index keywords"):
        before.store.keyword_ids("document", 3)
    before.store.close()
    assert main(["index", "keywords", str(old)]) == 0
    assert "added the keyword index" in capsys.readouterr().err
    after = load_index(old)
    first = min(_all_ids(after))
    word = after.store.lookup([first]).items[0].text.split()[-1].strip(".,;:!?")
    assert _keyword_index(after) == _all_ids(after) and after.store.keyword_ids(word, 3)
    after.store.close()
