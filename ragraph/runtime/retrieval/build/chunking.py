"""Splitting documents into passages by tokens of the index's own embedder, with overlap.

The splitter is semantic-text-splitter (Rust, maintained, on PyPI as wheels): it counts with a
Hugging Face `tokenizers.Tokenizer`, cuts at the largest semantic unit that fits (paragraphs,
sentences, words; Markdown structure for Markdown files), overlaps neighbouring chunks by up to
`overlap` tokens of whole units (a sentence longer than `overlap` is not shared, so the default
overlap is a quarter of the chunk: a sentence or two), and gives each chunk's character offset in the text, so a passage's origin is
exact, not searched for afterwards.

What the embedder sees is `title. chunk` after its passage prompt, between its special tokens
(builder.passage_text): a chunk is given the room that leaves under the model's maximum sequence
length, so no passage is ever truncated by the model unseen. The default chunk of 128 tokens is
about the ~100-word passages of the Wikipedia index, and the length MiniLM was trained on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.retrieval.build.documents import Document, need
from ragraph.runtime.retrieval.embed.spec import EmbedderSpec

DEFAULT_CHUNK_TOKENS = 128
# The fewest tokens a chunk keeps when a long title takes the rest of the sequence.
MIN_CHUNK_TOKENS = 16


@dataclass(frozen=True)
class ChunkConfig:
    """`tokens`: a chunk's most tokens (None: 128, or less when the model's sequence is
    shorter); `overlap`: most tokens shared by neighbours (None: a quarter of `tokens`)."""

    tokens: int | None = None
    overlap: int | None = None

    def __post_init__(self) -> None:
        if self.tokens is not None and self.tokens < MIN_CHUNK_TOKENS:
            raise ConfigError("chunk_tokens", f"must be at least {MIN_CHUNK_TOKENS}, "
                              f"got {self.tokens}")
        if self.overlap is not None and self.overlap < 0:
            raise ConfigError("overlap", f"must be 0 or more, got {self.overlap}")


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    text: str


class Chunker:
    """Cuts documents for one embedder: its tokenizer, its sequence length, its passage prompt."""

    def __init__(self, spec: EmbedderSpec, config: ChunkConfig | None = None,
                 max_seq: int | None = None) -> None:
        """`max_seq`: the model's sequence length as loaded (None: read from its files)."""
        config = config or ChunkConfig()
        self._tokenizer, recorded = _tokenizer_of(spec)
        max_seq = max_seq or recorded
        self._reserved = self.count(spec.passage_prompt) + _special_tokens(self._tokenizer)
        room = max_seq - self._reserved
        self.tokens = config.tokens if config.tokens is not None else min(DEFAULT_CHUNK_TOKENS,
                                                                           room)
        if self.tokens > room:
            raise ConfigError("chunk_tokens", f"{self.tokens} tokens do not fit {spec.name!r}: "
                              f"its sequences hold {max_seq} tokens, {self._reserved} of them "
                              f"its special tokens and passage prompt; at most {room}")
        self.overlap = config.overlap if config.overlap is not None else self.tokens // 4
        if self.overlap >= self.tokens:
            raise ConfigError("overlap", f"must be below chunk_tokens ({self.tokens}), "
                              f"got {self.overlap}")
        self._max_seq = max_seq
        self._splitters: dict[tuple[bool, int], object] = {}

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids) if text else 0

    def split(self, document: Document) -> list[Chunk]:
        """`document`'s chunks in order, each with its `[start, end)` in the document's text."""
        title_room = self._max_seq - self._reserved - self.count(f"{document.title}. ")
        if title_room < MIN_CHUNK_TOKENS:
            raise SearchIndexError(f"{document.source}: its title {document.title!r} leaves "
                                   f"{title_room} tokens of the embedder's sequence for text")
        capacity = min(self.tokens, title_room)
        splitter = self._splitter(document.kind == "markdown", capacity)
        return [Chunk(start, start + len(text), text)
                for start, text in splitter.chunk_indices(document.text) if text.strip()]


    def _splitter(self, markdown: bool, capacity: int):
        key = (markdown, capacity)
        if key not in self._splitters:
            splitters = need("semantic_text_splitter")
            kind = splitters.MarkdownSplitter if markdown else splitters.TextSplitter
            self._splitters[key] = kind.from_huggingface_tokenizer(
                self._tokenizer, capacity, overlap=min(self.overlap, capacity - 1))
        return self._splitters[key]


def _special_tokens(tokenizer) -> int:
    return len(tokenizer.encode("", add_special_tokens=True).ids)


def _tokenizer_of(spec: EmbedderSpec):
    """The model's fast tokenizer (truncation and padding off, so it counts every token) and its
    maximum sequence length, from the model's directory: the same files the embedder loads. A
    model served over HTTP is tokenized by its local copy when there is one."""
    from ragraph.runtime.retrieval.embed.model_files import resolve_model

    try:
        directory = resolve_model(spec.name)
    except SearchIndexError as err:
        if spec.source != "sentence-transformers":  # served: its name may be no hub name
            raise SearchIndexError(
                f"splitting documents by tokens needs the embedder's tokenizer on this machine, "
                f"and the embeddings server names its model {spec.name!r}, which is neither a "
                "model directory nor a model in the local Hugging Face cache: ask the server "
                "for the model by a directory of it or its Hugging Face name in the cache "
                "(--embedder), or serve it under that name (llama-server --alias, vLLM "
                "--served-model-name)") from err
        raise SearchIndexError(f"splitting documents by tokens needs the embedder's tokenizer: "
                               f"{err}") from err
    tokenizer = _load_tokenizer(directory)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer, _max_seq_length(directory)


def _load_tokenizer(directory: Path):
    from tokenizers import Tokenizer

    path = directory / "tokenizer.json"
    if path.is_file():
        return Tokenizer.from_file(str(path))
    from transformers import AutoTokenizer

    fast = AutoTokenizer.from_pretrained(str(directory), local_files_only=True, use_fast=True)
    if not hasattr(fast, "backend_tokenizer"):
        raise SearchIndexError(f"{directory}: the embedder has no fast tokenizer to split with")
    return fast.backend_tokenizer


def _max_seq_length(directory: Path) -> int:
    """sentence-transformers' `max_seq_length` (what it truncates at), else the tokenizer's
    limit, else the encoder's positions."""
    for name, key in (("sentence_bert_config.json", "max_seq_length"),
                      ("tokenizer_config.json", "model_max_length"),
                      ("config.json", "max_position_embeddings")):
        path = directory / name
        if path.is_file():
            value = json.loads(path.read_text(encoding="utf-8")).get(key)
            # Tokenizers without a limit record a huge sentinel (int(1e30)): no limit at all.
            if isinstance(value, int) and 0 < value < 1_000_000:
                return value
    raise SearchIndexError(f"{directory}: the embedder's maximum sequence length is not recorded "
                           "(sentence_bert_config.json max_seq_length)")
