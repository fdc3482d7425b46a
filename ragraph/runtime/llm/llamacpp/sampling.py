"""Choosing the next token from a logits row without copying the row into Python.

Gemma-3 has a 262,144-token vocabulary, so a row is 1 MiB of float32: every operation here is a
numpy call on the row (a view on llama.cpp's buffer), never a Python loop over it.
"""

from __future__ import annotations

import numpy as np

# Nucleus sampling first narrows to this many most likely tokens (argpartition, O(vocab)) and
# sorts only those; the full sort is the fallback when they hold less than top_p of the mass.
_TOP_P_CANDIDATES = 4096


def greedy(row: np.ndarray) -> int:
    """argmax, first index on ties (as llama.cpp's greedy sampler)."""
    return int(np.argmax(row))


def log_softmax_at(row: np.ndarray, token: int) -> float:
    """log p(token) under softmax(row)."""
    top = float(row.max())
    return float(row[token]) - top - float(np.log(np.exp(row - top).sum()))


def sample(row: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    """Temperature, then nucleus (top_p) sampling, with `rng` (seeded for reproducibility)."""
    if temperature == 0:
        return greedy(row)
    scaled = row / np.float32(temperature)
    if top_p >= 1.0:
        return _sample_from(np.arange(row.shape[0]), scaled, rng)
    k = min(_TOP_P_CANDIDATES, row.shape[0])
    cand = np.argpartition(scaled, -k)[-k:]
    cand = cand[np.argsort(scaled[cand])[::-1]]
    probs = _softmax(scaled[cand])
    # Mass of the candidates relative to the whole distribution decides whether they suffice.
    total = float(np.exp(scaled - scaled.max()).sum())
    cand_mass = float(np.exp(scaled[cand] - scaled.max()).sum()) / total
    if cand_mass < top_p:
        cand = np.argsort(scaled)[::-1]
        probs = _softmax(scaled[cand])
        cand_mass = 1.0
    cum = np.cumsum(probs) * cand_mass
    keep = int(np.searchsorted(cum, top_p)) + 1
    return _sample_from(cand[:keep], scaled[cand[:keep]], rng)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _sample_from(ids: np.ndarray, logits: np.ndarray, rng: np.random.Generator) -> int:
    probs = _softmax(logits.astype(np.float64))
    cum = np.cumsum(probs)
    i = int(np.searchsorted(cum, rng.random() * cum[-1], side="right"))
    return int(ids[min(i, len(ids) - 1)])
