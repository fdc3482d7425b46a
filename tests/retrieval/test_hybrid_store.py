"""The passage store's keyword index (SQLite FTS5, BM25) and filters: built with the store, kept
in step by `index add`/`delete`, added to a store from before it by `ragraph index keywords`;
filtered dense search is exact (faiss's selector inside the scan, never a filter after top-k);
fusion is reciprocal rank fusion, deterministic."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.ir.values import Origin
from ragraph.runtime.retrieval.keywords import add_keyword_index, match_query
from ragraph.runtime.retrieval.options import SearchOptions, Where, fuse
from ragraph.runtime.retrieval.store import PassageStore, StoredPassage, write_store

TEXTS = [
    "The question mark operator propagates errors to the caller.",
    "A table of operators: plus, minus, times and the question mark.",
    "Traits define shared behaviour; a trait object is dynamically dispatched.",
    "Ownership rules: each value has one owner at a time.",
    "Error propagation with the ? operator returns early on Err.",
]


def rows(texts=TEXTS, first=0):
    return [StoredPassage(first + i, None, f"Chapter {first + i}", t,
                          origin=Origin(f"book/ch{(first + i) % 3}.md", 0, len(t)))
            for i, t in enumerate(texts)]


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "passages.sqlite"
    write_store(path, rows())
    s = PassageStore(path)
    yield s
    s.close()


def test_keyword_search_ranks_by_bm25_and_stems(store):
    # "propagation" and "propagates" share the porter stem.
    ids = store.keyword_ids("how does error propagation work", 3)
    assert set(ids[:2]) == {0, 4}
    assert store.keyword_ids("?!", 3) == []  # no words: nothing, never FTS5 syntax
    assert match_query('a "quoted" AND b-c') == '"a" OR "and" OR "b" OR "c" OR "quoted"'


def test_filters_by_source_glob_and_any_field(store):
    assert store.allowed_ids(Where(source="book/ch0.md")).tolist() == [0, 3]
    assert store.allowed_ids(Where(source="book/*")).tolist() == [0, 1, 2, 3, 4]
    assert store.allowed_ids(Where(fields=(("title", "Chapter 2"),))).tolist() == [2]
    assert sorted(store.keyword_ids("operator", 5, Where(source="*ch1.md"))) == [1, 4]
    with pytest.raises(ConfigError, match="^filter.colour: the passage store has no such field"):
        store.allowed_ids(Where(fields=(("colour", "red"),)))


def test_triggers_keep_the_keyword_index_in_step(tmp_path):
    path = tmp_path / "passages.sqlite"
    write_store(path, rows())
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM passages WHERE id = 0")
    conn.executemany('INSERT INTO passages (id, doc_id, title, text, synthetic) VALUES '
                     '(?, NULL, ?, ?, ?)', [(9, "New", "zebra crossing rules", 0),
                                            (10, "Pad", "zebra padding", 1)])
    conn.commit()
    conn.close()
    store = PassageStore(path)
    assert 0 not in store.keyword_ids("propagates", 5)
    assert store.keyword_ids("zebra", 5) == [9]  # synthetic padding is never a keyword hit
    store.close()


def test_a_store_from_before_gets_its_keyword_index(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE passages (id INTEGER PRIMARY KEY, doc_id TEXT, title TEXT NOT "
                 "NULL, text TEXT NOT NULL, synthetic INTEGER NOT NULL DEFAULT 0)")
    conn.executemany("INSERT INTO passages VALUES (?, NULL, ?, ?, 0)",
                     [(i, f"T{i}", t) for i, t in enumerate(TEXTS)])
    conn.commit()
    old = PassageStore(path)
    with pytest.raises(SearchIndexError, match="no keyword index.*ragraph index keywords"):
        old.keyword_ids("trait", 3)
    with pytest.raises(ConfigError, match="^filter.source: this index's passages have no source"):
        old.allowed_ids(Where(source="*.md"))
    old.close()
    assert add_keyword_index(conn) and not add_keyword_index(conn)
    conn.commit()
    conn.close()
    store = PassageStore(path)
    assert store.keyword_ids("trait object", 1) == [2]
    store.close()


def test_rrf_fuses_by_rank_with_ties_to_the_smaller_id():
    ids, scores = fuse([[5, 3, 9], [3, 7]], 3)
    assert ids == [3, 5, 7]  # 3 is in both lists; 5 and 7 tie at rank 1 / rank 2 ... by score
    assert scores[0] == pytest.approx(1 / 62 + 1 / 61)
    tie_ids, _ = fuse([[8], [2]], 2)
    assert tie_ids == [2, 8]


def test_options_are_checked_where_given():
    with pytest.raises(ConfigError, match="^k: must be an integer from 1 to 1000, got 0"):
        SearchOptions.of(k=0)
    with pytest.raises(ConfigError, match="^mode: must be one of dense, hybrid, got 'bm25'"):
        SearchOptions.of(mode="bm25")
    with pytest.raises(ConfigError, match="^filter.title: must be a string or integer"):
        SearchOptions.of(filter={"title": ["a"]})
    got = SearchOptions.from_json({"k": 2, "filter": {"source": "a/*"}}, "line 1: ")
    assert got.spec(5) == got.spec(5, "dense") and got.spec(5).k == 2
    assert SearchOptions(mode="hybrid").over(got) == SearchOptions(2, "hybrid", Where("a/*"))


def test_filtered_search_is_faiss_with_a_selector(random_engine, random_vectors):
    """Exactly `index.search` with `SearchParametersIVF(sel=IDSelectorBatch)`, and k results
    where a filter after an unfiltered top-k would leave fewer."""
    import faiss

    allowed = np.arange(0, random_vectors.shape[0], 7, dtype=np.int64)
    queries = np.random.default_rng(3).standard_normal((12, random_vectors.shape[1]))
    for q in queries.astype(np.float32):
        probe = random_engine.probe(q.reshape(1, -1), 8)[0]
        got = random_engine.search_filtered(q, probe, 10, allowed)
        sel = faiss.IDSelectorBatch(allowed.size, faiss.swig_ptr(allowed))
        params = faiss.SearchParametersIVF(sel=sel, nprobe=8)
        want_d, want_i = random_engine.index.search(q.reshape(1, -1), 10, params=params)
        assert np.array_equal(got.ids, want_i[0]) and np.array_equal(got.distances, want_d[0])
        assert np.isin(got.ids, allowed).all() and (got.ids >= 0).all()
        _, plain = random_engine.index.search(q.reshape(1, -1), 10,
                                              params=faiss.SearchParametersIVF(nprobe=8))
        assert np.isin(plain[0], allowed).sum() < 10  # what post-filtering would have left
