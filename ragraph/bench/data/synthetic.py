"""Synthetic padding vectors drawn around the clusters of the real passage embeddings.

A benchmark index of ~30k real passages costs almost nothing to search, while the regime the
papers study (HedraRAG: 38M passages, IVF4096, nprobe 128-512) spends a large share of a request in
retrieval. Padding with N synthetic vectors gives the index a realistic size, and because they are
drawn around the real topic clusters (in proportion to each cluster's real size), the IVF lists keep
the real corpus's skew. The padding is deterministic for a seed and chunk size; every synthetic
entry is flagged as such in the passage store, the manifest and the bench output.

Each synthetic vector is normalize(c + s * spread_c * z), with c a real cluster centroid, spread_c
that cluster's per-dimension residual RMS, z standard normal and s = `spread` (> 1 places them a
little farther out than real passages, so real passages keep winning the top-k for real questions
while the scan cost, which only depends on list sizes, is the same).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ragraph.errors import ConfigError


@dataclass(frozen=True)
class ClusterModel:
    """Real clusters: unit-free centroids, per-cluster residual RMS per dimension, and weights."""

    centroids: np.ndarray  # (c, d) float32
    spread: np.ndarray  # (c,) float32
    weights: np.ndarray  # (c,) float64, sums to 1

    @property
    def dim(self) -> int:
        return int(self.centroids.shape[1])


@dataclass(frozen=True)
class PaddingConfig:
    count: int
    seed: int = 0
    clusters: int = 256  # real topic clusters to draw around
    spread: float = 1.3
    chunk: int = 131_072  # vectors per generated chunk (bounds memory: 200 MB at d = 384)

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ConfigError("--scale", f"must be >= 0, got {self.count}")
        if self.clusters < 1:
            raise ConfigError("clusters", f"must be >= 1, got {self.clusters}")
        if not self.spread > 0:
            raise ConfigError("spread", f"must be > 0, got {self.spread}")
        if self.chunk < 1:
            raise ConfigError("chunk", f"must be >= 1, got {self.chunk}")


def fit_clusters(real: np.ndarray, clusters: int, seed: int = 0) -> ClusterModel:
    """k-means (inner product, as the index searches) over the real embeddings."""
    import faiss

    x = np.ascontiguousarray(real, dtype=np.float32)
    k = max(1, min(clusters, x.shape[0] // 4))
    km = faiss.Kmeans(x.shape[1], k, niter=20, seed=seed, spherical=True, verbose=False)
    km.train(x)
    _, assign = km.index.search(x, 1)
    assign = assign[:, 0]
    counts = np.bincount(assign, minlength=k).astype(np.float64)
    spread = np.zeros(k, dtype=np.float32)
    for c in np.flatnonzero(counts):
        resid = x[assign == c] - km.centroids[c]
        spread[c] = float(np.sqrt(np.mean(resid * resid)))
    # An empty cluster is never drawn (weight 0); a singleton gets the median spread.
    spread[counts <= 1] = float(np.median(spread[counts > 1])) if (counts > 1).any() else 0.05
    return ClusterModel(km.centroids.astype(np.float32), spread, counts / counts.sum())


def draw(model: ClusterModel, config: PaddingConfig) -> Iterator[np.ndarray]:
    """The padding as float32 chunks of unit vectors, deterministic for (seed, chunk)."""
    done = 0
    index = 0
    while done < config.count:
        n = min(config.chunk, config.count - done)
        rng = np.random.default_rng([config.seed, index])
        which = rng.choice(model.weights.shape[0], size=n, p=model.weights)
        noise = rng.standard_normal((n, model.dim), dtype=np.float32)
        noise *= (config.spread * model.spread[which])[:, None]
        noise += model.centroids[which]
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        yield noise
        done += n
        index += 1
