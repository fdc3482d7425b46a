"""The rounding-error bound behind list-major scans holds against faiss's own kernel, and follows
the matmul precision torch is allowed to use."""

from __future__ import annotations

import numpy as np
import pytest

from ragraph.runtime.retrieval.ivf.bounds import (
    U32,
    error_bound,
    matmul_roundoff,
    round_up,
    row_norms,
)
from ragraph.runtime.retrieval.protocol import Metric

from .helpers import faiss


def faiss_distances(metric: Metric, q: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Every (query, vector) distance by the kernel faiss's IVF-Flat scanner calls."""
    ids = np.tile(np.arange(y.shape[0], dtype=np.int64), (q.shape[0], 1))
    out = np.empty(ids.shape, dtype=np.float32)
    kernel = faiss.fvec_L2sqr_by_idx if metric is Metric.L2 else faiss.fvec_inner_products_by_idx
    sp = faiss.swig_ptr
    kernel(sp(out), sp(q), sp(y), sp(ids), q.shape[1], q.shape[0], y.shape[0])
    return out


@pytest.mark.parametrize("metric", [Metric.L2, Metric.IP])
@pytest.mark.parametrize("offset", [0.0, 30.0])
def test_estimates_stay_within_the_bound(metric, offset):
    """Products in float32 (as the scan computes them) are within E of faiss's values, shifted
    by |q|^2 for L2; data far from the origin (offset) is where cancellation bites."""
    rng = np.random.default_rng(0)
    d = 96
    y = (offset + rng.standard_normal((500, d))).astype(np.float32)
    q = (offset + rng.standard_normal((40, d))).astype(np.float32)
    sq, norms = row_norms(y)
    if metric is Metric.L2:
        est = sq[None, :] + (-2 * q) @ y.T
        shift = (q.astype(np.float64) ** 2).sum(1)[:, None]
    else:
        est, shift = -(q @ y.T), 0.0
    exact = faiss_distances(metric, q, y).astype(np.float64)
    value = exact if metric is Metric.L2 else -exact
    bound = error_bound(metric, d, row_norms(q)[1], norms.max())
    err = np.abs(est.astype(np.float64) + shift - value)
    assert (err <= bound[:, None]).all()
    assert err.max() > 0  # the estimates really are not faiss's values


def test_round_up_never_lowers_a_threshold():
    x = np.array([1 / 3, -1 / 3, 1e-40, 2.0, np.inf])
    up = round_up(x)
    assert up.dtype == np.float32
    assert (up.astype(np.float64) >= x).all()
    assert up[3] == 2.0  # already a float32: unchanged


def test_matmul_roundoff_follows_torch_precision():
    torch = pytest.importorskip("torch")
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert matmul_roundoff("cpu") == U32
        torch.set_float32_matmul_precision("high")  # TF32 allowed: 10 mantissa bits
        assert matmul_roundoff("cpu") == 2.0**-11
        assert matmul_roundoff("cuda") == 2.0**-11
    finally:
        torch.set_float32_matmul_precision(before)
