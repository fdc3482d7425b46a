"""What an index's vectors mean: the embedder that made them, as its manifest records it.

An index is only searchable with the embedder it was built with: the same model, the same prompts
in front of queries and passages, and the same normalization. `EmbedderSpec` is that record. The
build writes it into `manifest.json`; `run`, `serve` and `bench` read it back and open the query
side from it (the local model, or an embeddings server with `--embedder-url`), so nothing at run
time has to repeat how the index was built. An index written before the record existed names only
all-MiniLM-L6-v2 and is read as exactly that (`legacy`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import PurePosixPath

from ragraph.errors import ConfigError, SearchIndexError

MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIM = 384
# Where the vectors come from: a sentence-transformers model loaded in this process, or an
# OpenAI-compatible /v1/embeddings server.
SOURCES = ("sentence-transformers", "openai-http")
SIMILARITIES = ("cosine", "dot", "euclidean", "manhattan")
# How a local model embeds queries, batch-invariant either way (embedder.py, int8.py); float32 is
# a query embedder that is not (it never searches an index: query_embedder picks one of these).
QUERY_PRECISIONS = ("float64", "int8")


@dataclass(frozen=True)
class EmbedderSpec:
    name: str  # a Hugging Face name, a model directory, or the model id a server answers with
    dim: int
    query_prompt: str = ""
    passage_prompt: str = ""
    normalize: bool = True  # vectors are L2-normalized (so inner product is cosine)
    similarity: str = "cosine"  # the model's own similarity (sentence-transformers' config)
    source: str = "sentence-transformers"
    # float64 for every index built before int8 queries existed: they keep their exact answers.
    query_precision: str = "float64"

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("embedder", "the embedder needs a name")
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise ConfigError("embedder.dim", f"must be a positive integer, got {self.dim!r}")
        if self.source not in SOURCES:
            raise ConfigError("embedder.source", f"must be one of {SOURCES}, got {self.source!r}")
        if self.query_precision not in ("float32", *QUERY_PRECISIONS):
            raise ConfigError("embedder.query_precision", f"must be one of {QUERY_PRECISIONS}, "
                              f"got {self.query_precision!r}")
        if self.similarity not in SIMILARITIES:
            raise ConfigError("embedder.similarity",
                              f"must be one of {SIMILARITIES}, got {self.similarity!r}")

    def describe(self) -> str:
        """One line: `name (dim 384, cosine, query prompt 'query: ')`."""
        parts = [f"dim {self.dim}", self.similarity if self.normalize else "unnormalized"]
        if self.query_prompt:
            parts.append(f"query prompt {self.query_prompt!r}")
        if self.passage_prompt:
            parts.append(f"passage prompt {self.passage_prompt!r}")
        if self.source == "openai-http":
            parts.append("served over HTTP")
        return f"{self.name} ({', '.join(parts)})"

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(where: str, raw: object) -> EmbedderSpec:
        if not isinstance(raw, dict):
            raise SearchIndexError(f"{where}: field 'embedding' must be a JSON object")
        known = {f.name: f for f in fields(EmbedderSpec)}
        for key in raw:
            if key not in known:
                raise SearchIndexError(f"{where}: unknown field 'embedding.{key}'")
        for key in ("name", "dim"):
            if key not in raw:
                raise SearchIndexError(f"{where}: field 'embedding.{key}' is missing")
        types = {"dim": int, "normalize": bool}
        for key, value in raw.items():
            want = types.get(key, str)
            if not isinstance(value, want) or (want is int and isinstance(value, bool)):
                raise SearchIndexError(f"{where}: field 'embedding.{key}' must be {want.__name__}")
        try:
            return EmbedderSpec(**raw)
        except ConfigError as err:
            raise SearchIndexError(f"{where}: {err}") from err


def legacy(name: str, dim: int) -> EmbedderSpec:
    """The record of an index built before manifests carried one: only MiniLM was possible then,
    with no prompts and normalized vectors."""
    return EmbedderSpec(name=name, dim=dim)


# MiniLM as an index built before int8 queries records it (float64 queries)...
MINILM = EmbedderSpec(MINILM_NAME, MINILM_DIM)
# ...and as a new one does: a mean-pooled BERT gets int8 queries (embedder._query_precision).
MINILM_NEW = replace(MINILM, query_precision="int8")


def same_model(a: str, b: str) -> bool:
    """Whether two model names mean one model: equal, or equal in their last path component
    (a server answers with the name it was started with: `/models/bge-small-en-v1.5`,
    `BAAI/bge-small-en-v1.5` and `bge-small-en-v1.5` are one model), case aside."""
    return a == b or _short(a) == _short(b)


def _short(name: str) -> str:
    return PurePosixPath(name.rstrip("/")).name.lower()


def check_compatible(index: EmbedderSpec, query: EmbedderSpec, index_where: str) -> None:
    """One line naming both sides when `query` cannot search an index built with `index`."""
    if not same_model(index.name, query.name):
        raise SearchIndexError(
            f"{index_where} was built with embedder {index.name!r}, but queries would be "
            f"embedded by {query.name!r}" + _hint(query))
    if index.dim != query.dim:
        raise SearchIndexError(
            f"{index_where} holds {index.dim}-dimensional vectors of {index.name!r}, but "
            f"{query.name!r} answers {query.dim}-dimensional ones" + _hint(query))
    local = index.source == query.source == "sentence-transformers"
    if local and index.query_precision != query.query_precision:
        raise SearchIndexError(
            f"{index_where} embeds its queries in {index.query_precision}, but this embedder "
            f"computes {query.query_precision}: the vectors would differ from the ones the "
            "index was built for")


def _hint(query: EmbedderSpec) -> str:
    if query.source == "openai-http":
        return ("; point --embedder-url at a server of the index's model (or rebuild the index "
                "with `ragraph index build --embedder-url`)")
    return "; rebuild the index with `ragraph index build --embedder ...`"
