"""Helpers shared by the retrieval tests: small faiss IVF indexes and realistic queries."""

from __future__ import annotations

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")


def make_ivf(
    vectors: np.ndarray, nlist: int, metric: str = "l2", kind: str = "flat", ids=None
) -> object:
    d = vectors.shape[1]
    m = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
    quantizer = faiss.IndexFlat(d, m)
    if kind == "sq8":
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, d, nlist, faiss.ScalarQuantizer.QT_8bit, m, metric == "l2"
        )
    else:
        index = faiss.IndexIVFFlat(quantizer, d, nlist, m)
    index.cp.seed = 7
    index.train(vectors)
    if ids is None:
        ids = np.arange(vectors.shape[0], dtype=np.int64)
    index.add_with_ids(vectors, ids)
    return index


def queries_from(rng: np.random.Generator, vectors: np.ndarray, n: int) -> np.ndarray:
    """Perturbed database vectors: queries that land inside the data, like real ones."""
    pick = vectors[rng.choice(vectors.shape[0], size=n, replace=False)]
    noise = rng.standard_normal(pick.shape).astype(np.float32) * 0.3 * pick.std()
    return (pick + noise).astype(np.float32)
