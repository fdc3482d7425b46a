"""Synthetic padding: deterministic, unit vectors, drawn around the real clusters, and labelled
as synthetic in the store, the manifest and bench.json of the cached index."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragraph.bench.data.index import SYNTHETIC_TITLE, IndexSpec, ensure_bench_index, index_dir
from ragraph.bench.data.synthetic import PaddingConfig, draw, fit_clusters
from ragraph.errors import ConfigError
from ragraph.runtime.retrieval.manifest import Manifest, load_index

from .helpers import TOPICS, toy_base


@pytest.fixture(scope="module")
def base():
    return toy_base()


def test_padding_is_deterministic_and_unit_norm(base):
    model = fit_clusters(base.vectors, clusters=6, seed=0)
    cfg = PaddingConfig(1000, seed=5, clusters=6, chunk=300)
    a = np.concatenate(list(draw(model, cfg)))
    b = np.concatenate(list(draw(model, cfg)))
    assert a.shape == (1000, base.vectors.shape[1])
    assert np.array_equal(a, b)
    assert not np.array_equal(a, np.concatenate(list(draw(model, PaddingConfig(1000, seed=6)))))
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)


def test_padding_clusters_around_the_real_centroids(base):
    model = fit_clusters(base.vectors, clusters=6, seed=0)
    syn = np.concatenate(list(draw(model, PaddingConfig(3000, seed=1, clusters=6))))
    # Each synthetic vector is much closer to some real centroid than random directions are,
    # and the clusters are hit in proportion to their real sizes.
    best = (syn @ model.centroids.T).max(axis=1)
    rand = np.random.default_rng(0).standard_normal(syn.shape).astype(np.float32)
    rand /= np.linalg.norm(rand, axis=1, keepdims=True)
    assert best.mean() > 0.5 > (rand @ model.centroids.T).max(axis=1).mean()
    share = np.bincount((syn @ model.centroids.T).argmax(axis=1), minlength=6) / len(syn)
    assert np.abs(share - model.weights).max() < 0.05


def test_bad_scale_names_the_flag():
    with pytest.raises(ConfigError, match="--scale"):
        IndexSpec(scale=-1)


def test_padded_index_is_cached_and_labels_synthetic_entries(base, tmp_path: Path):
    spec = IndexSpec(scale=2000, seed=0)
    info = ensure_bench_index(tmp_path, base, spec)
    directory = index_dir(tmp_path, base, spec)
    assert Path(info.directory) == directory
    assert (info.real, info.synthetic) == (len(base.passages), 2000)
    assert "synthetic=2000" in Manifest.read(directory).source
    assert json.loads((directory / "bench.json").read_text())["synthetic"] == 2000
    loaded = load_index(directory)
    n = len(base.passages)
    real, syn = loaded.store.lookup([0, n - 1]), loaded.store.lookup([n, n + 1999])
    assert not any(p.synthetic for p in real) and real.items[0].title in TOPICS
    assert all(p.synthetic and p.title == SYNTHETIC_TITLE and p.text == "" for p in syn)
    mtime = (directory / "bench.json").stat().st_mtime_ns
    ensure_bench_index(tmp_path, base, spec)  # cached: not rebuilt
    assert (directory / "bench.json").stat().st_mtime_ns == mtime


def test_bench_indexes_record_int8_queries_and_a_float64_cache_is_built_again(base,
                                                                              tmp_path: Path):
    """The bench measures the query embedder a new index gets (int8 for MiniLM); an index cached
    when bench indexes still recorded float64 queries is not reused."""
    spec = IndexSpec(scale=500, seed=0)
    ensure_bench_index(tmp_path, base, spec)
    directory = index_dir(tmp_path, base, spec)
    assert Manifest.read(directory).embedder_spec.query_precision == "int8"
    raw = json.loads((directory / "manifest.json").read_text())
    raw["embedding"]["query_precision"] = "float64"  # as the earlier code recorded it
    (directory / "manifest.json").write_text(json.dumps(raw))
    ensure_bench_index(tmp_path, base, spec)
    assert Manifest.read(directory).embedder_spec.query_precision == "int8"


def test_a_build_the_disk_cannot_hold_fails_first_and_says_what_to_do(base, tmp_path: Path,
                                                                       monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 10**3, 10**3))
    spec = IndexSpec(scale=2000, seed=0)
    with pytest.raises(ConfigError, match="--scale.*GB free.*RAGRAPH_CACHE"):
        ensure_bench_index(tmp_path, base, spec)
    assert not index_dir(tmp_path, base, spec).with_name(
        index_dir(tmp_path, base, spec).name + ".partial").exists()
