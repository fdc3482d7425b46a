"""How far a matrix-product estimate of a distance can be from faiss's own value, and the rule
that turns that bound into a candidate set holding every element faiss could keep.

faiss's IVF-Flat scanner computes each distance on its own, in float32: `fvec_L2sqr(x, y)` sums
(x_i - y_i)^2, `fvec_inner_product(x, y)` sums x_i * y_i, in whatever order its SIMD loop
reassociates them. A list-major scan estimates the same values from one matrix product per list,
in a lower-is-better form (`est`): inner product -q.y; L2 |y|^2 - 2 q.y, which is the distance
minus |q|^2, a constant per query that never changes a comparison. With u the unit roundoff and
gamma(n) = n u / (1 - n u), the textbook bound for a sum of n rounded products in any order, with
or without FMA, is |fl(sum) - sum| <= gamma(n) sum |terms| (Higham, Accuracy and Stability of
Numerical Algorithms, 3.1):

- faiss, inner product: |F - q.y| <= gamma_d(u32) |q||y| (Cauchy-Schwarz on sum |q_i y_i|);
  L2: each term (x_i - y_i)^2 carries 3 roundings, the sum of non-negative terms d - 1 more, so
  |F - |q-y|^2| <= gamma_{d+2}(u32) |q-y|^2 <= gamma_{d+2}(u32) (|q| + |y|)^2.
- the estimate: the product's inputs may be rounded to the matmul's precision (TF32, bf16) and
  its sum is any order: |fl(q.y) - q.y| <= gamma_{d+2}(u_mm) |q||y|. L2 adds |y|^2 rounded to
  float32 and one float32 addition: 4 u32 (|q| + |y|)^2 more, with room for the bound's own
  float64 evaluation.
- underflow and flush-to-zero: at most one smallest normal per rounding, 3d + 8 of them.

So |est + shift - F| <= E(q, list) with |y| taken as the list's largest norm. If F* is the m-th
best faiss value over some set of lists, then for each list L, F* <= (m-th best est in L) + E_L
(take the m elements of L with the best estimates: their faiss values are at most that), and every
element x with F_x <= F* has est_x <= F* + E_x. So keeping every x with
est_x <= min_L(m-th est in L + E_L) + E_x keeps every element a faiss heap of size m could hold,
ties at the boundary included, whatever the lists are scanned in or how they are grouped.
"""

from __future__ import annotations

import numpy as np

from ragraph.runtime.retrieval.protocol import Metric

U32 = 2.0**-24  # float32 unit roundoff (round to nearest)
_TINY = float(np.finfo(np.float32).tiny)
# Unit roundoff of a float32 matrix product by the precision torch is allowed to use for it.
_MATMUL_ROUNDOFF = {"highest": U32, "ieee": U32, "high": 2.0**-11, "tf32": 2.0**-11,
                    "medium": 2.0**-8, "bf16": 2.0**-8}


def gamma(n: int, u: float) -> float:
    """Higham's gamma_n: the relative error bound of an n-term sum of rounded products."""
    if n * u >= 0.5:
        raise ValueError(f"no useful bound: {n} terms at unit roundoff {u}")
    return n * u / (1 - n * u)


def matmul_roundoff(device_type: str = "cpu") -> float:
    """The unit roundoff of a torch float32 matmul on `device_type` under the current global
    precision settings (read at each call: TF32 or bf16 may be switched on by anyone)."""
    import torch

    modes = {torch.get_float32_matmul_precision()}
    backends = [getattr(torch.backends, "fp32_precision", None)]
    if device_type == "cuda":
        backends.append(getattr(torch.backends.cuda.matmul, "fp32_precision", None))
        if torch.backends.cuda.matmul.allow_tf32:
            modes.add("tf32")
    else:
        mkldnn = getattr(torch.backends.mkldnn, "matmul", None)
        backends.append(getattr(mkldnn, "fp32_precision", None))
    modes.update(b for b in backends if isinstance(b, str))
    return max(_MATMUL_ROUNDOFF.get(m, U32) for m in modes)


def error_bound(metric: Metric, dim: int, query_norms: np.ndarray, max_norm: np.ndarray,
                matmul_u: float = U32) -> np.ndarray:
    """E per (query, list) pair: |est + shift - faiss's distance| <= E for every vector of the
    list (`max_norm`: its largest vector norm), as float64 (see the module docstring)."""
    qn = np.asarray(query_norms, dtype=np.float64)
    yn = np.asarray(max_norm, dtype=np.float64)
    if metric is Metric.IP:
        rel = (gamma(dim + 2, matmul_u) + gamma(dim, U32)) * qn * yn
    else:
        rel = (2 * gamma(dim + 2, matmul_u) + 4 * U32 + gamma(dim + 2, U32)) * (qn + yn) ** 2
    return rel + (3 * dim + 8) * _TINY * (1 + qn + yn) ** 2


def round_up(x: np.ndarray) -> np.ndarray:
    """The smallest float32 values >= `x` (float64): a threshold that loses no candidate when
    compared with float32 estimates."""
    x = np.asarray(x, dtype=np.float64)
    f = x.astype(np.float32)
    return np.where(f < x, np.nextafter(f, np.float32(np.inf)), f)


def row_norms(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Squared norms of float32 rows, rounded once to float32 from float64, and the norms
    (float64, nudged up so a bound built on them stays an upper bound)."""
    sq = np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64)
    return sq.astype(np.float32), np.sqrt(sq) * (1 + 2.0**-40)
