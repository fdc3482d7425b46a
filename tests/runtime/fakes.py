"""Real faiss over random vectors, with a hashing embedder and an in-memory store: fast, exact,
and deterministic, so executor tests need no model download."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ragraph.ir.values import Passage, Passages
from ragraph.runtime.search_service import SearchService

DIM = 32


class HashEmbedder:
    """Text -> a unit vector seeded by the text's hash (stable across processes)."""

    name = "hash"
    dim = DIM

    def embed(self, texts: Sequence[str], threads: int | None = None) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


class MemoryStore:
    def __init__(self, n: int) -> None:
        self.rows = {i: (f"Title {i}", f"passage number {i} about topic {i % 17}") for i in range(n)}

    def lookup(self, ids, scores=None) -> Passages:
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        scores = [0.0] * len(ids) if scores is None else [float(s) for s in scores]
        return Passages(tuple(Passage(i, *self.rows[i], score=s)
                              for i, s in zip(ids, scores, strict=True) if i >= 0))


def random_search(n: int = 4000, nlist: int = 64, nprobe: int = 16, seed: int = 0) -> SearchService:
    import faiss

    from ragraph.runtime.retrieval.ivf.engine import FaissIVFEngine

    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((nlist, DIM)).astype(np.float32)
    x = centers[rng.integers(0, nlist, n)] + 0.3 * rng.standard_normal((n, DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    quantizer = faiss.IndexFlatL2(DIM)
    index = faiss.IndexIVFFlat(quantizer, DIM, nlist)
    index.train(x)
    index.add(x)
    return SearchService(FaissIVFEngine(index, cache_bytes=0), HashEmbedder(), MemoryStore(n), nprobe=nprobe)
