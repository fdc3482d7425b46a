"""Splitting documents into passages by tokens of the index's own embedder, with overlap.

The splitter is semantic-text-splitter (Rust, maintained, on PyPI as wheels): it counts with a
Hugging Face `tokenizers.Tokenizer`, cuts at the largest semantic unit that fits (paragraphs,
sentences, words; Markdown structure for Markdown files), overlaps neighbouring chunks by up to
`overlap` tokens of whole units (a sentence longer than `overlap` is not shared, so the default
overlap is a quarter of the chunk: a sentence or two), and gives each chunk's character offset in the text, so a passage's origin is
exact, not searched for afterwards.

A chunk is also held to `CHARS_PER_TOKEN` characters a token of its budget (a run of characters
without a break is cut), and every chunk is checked against both budgets before it is kept.

What the embedder sees is `title. chunk` after its passage prompt, between its special tokens
(builder.passage_text), or `title > section. chunk` for Markdown with the chunk's heading path
(at most SECTION_TOKENS tokens of it): a chunk is given the room that leaves under the model's
maximum sequence length, so no passage is ever truncated by the model unseen. The default chunk of 128 tokens is
about the ~100-word passages of the Wikipedia index, and the length MiniLM was trained on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.retrieval.build.documents import Document, need
from ragraph.runtime.retrieval.build.structure import outline, structure_only
from ragraph.runtime.retrieval.embed.spec import EmbedderSpec

DEFAULT_CHUNK_TOKENS = 128
# A passage's most characters per token of its budget. WordPiece counts any word over 100
# characters (DNA, hashes, base64, minified code) as one [UNK], so a budget in tokens alone let
# a 300,000-character run through as one passage, too long for any LLM prompt; English runs at
# 4-5 characters a token, so this binds only on such runs.
CHARS_PER_TOKEN = 8
# The fewest tokens a chunk keeps when a long title takes the rest of the sequence.
MIN_CHUNK_TOKENS = 16
# The most tokens a Markdown passage's section (its heading path below the title) adds to what is
# embedded, `Title > Section > Subsection. text`: the section helps find the passage (measured in
# docs/benchmarks/code-figures.md, "Chunking documents"), and 24 tokens hold three headings.
SECTION_TOKENS = 24


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
    headings: tuple[str, ...] = ()  # a Markdown chunk's heading path, outermost first
    section: str = ""  # the part of it embedded after the title (Chunker._section)


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
        self.chars = self.tokens * CHARS_PER_TOKEN
        self._splitters: dict[tuple[bool | None, int], object] = {}

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids) if text else 0

    def split(self, document: Document) -> list[Chunk]:
        """`document`'s chunks in order, each with its `[start, end)` in the document's text."""
        title_room = self._max_seq - self._reserved - self.count(f"{document.title}. ")
        if title_room < MIN_CHUNK_TOKENS:
            raise SearchIndexError(f"{document.source}: its title {document.title!r} leaves "
                                   f"{title_room} tokens of the embedder's sequence for text")
        markdown = document.kind == "markdown"
        section_room = (min(SECTION_TOKENS, max(0, title_room - MIN_CHUNK_TOKENS))
                        if markdown else 0)
        capacity = min(self.tokens, title_room - section_room)
        splitter = self._splitter(markdown, capacity)
        chunks = [chunk for start, text in splitter.chunk_indices(document.text) if text.strip()
                  for chunk in self._fit(document, start, text, capacity)]
        if not markdown:
            return chunks
        sections: dict[tuple[str, ...], str] = {}
        return [Chunk(c.start, c.end, c.text, c.headings, sections.setdefault(
                    c.headings, self._section(document.title, c.headings, section_room)))
                for c in self._structured(document.text, chunks, capacity)]

    def _section(self, title: str, path: tuple[str, ...], room: int) -> str:
        """`path` below `title` as embedded after it: outer headings dropped, then the innermost
        halved, until it adds at most `room` tokens."""
        names = list(path[1:] if path[:1] == (title,) else path)
        base = self.count(f"{title}. ")
        while names and names[0]:
            section = " > ".join(names)
            if self.count(f"{title} > {section}. ") - base <= room:
                return section
            if len(names) > 1:
                names.pop(0)
            else:
                names[0] = names[0][:len(names[0]) // 2]
        return ""

    def _structured(self, text: str, chunks: list[Chunk], capacity: int) -> list[Chunk]:
        """Markdown chunks with their heading paths, and none that is headings or fences alone:
        such a chunk joins the next one when both fit together, and is dropped otherwise (its
        headings live on in the paths of the chunks of their section)."""
        out: list[Chunk] = []
        pending: Chunk | None = None
        for chunk in chunks:
            if pending is not None:
                joined = text[pending.start:chunk.end]
                if len(joined) <= self.chars and self.count(joined) <= capacity:
                    chunk = Chunk(pending.start, chunk.end, joined)
                pending = None
            if structure_only(chunk.text):
                pending = chunk
            else:
                out.append(chunk)
        where = outline(text)
        return [Chunk(c.start, c.end, c.text, where.path_at(c.start)) for c in out]

    def _fit(self, document: Document, start: int, text: str, capacity: int,
             depth: int = 0) -> list[Chunk]:
        """`text` (at `start`) as chunks within both budgets: checked on every chunk, and one
        over either cut again, by characters or by tokens."""
        long, many = len(text) > self.chars, self.count(text) > capacity
        if not (long or many):
            return [Chunk(start, start + len(text), text)]
        if depth == 3:  # a cut by characters then by tokens fits: this is a splitter's fault
            raise SearchIndexError(f"{document.source}: characters {start}-{start + len(text)} "
                                   f"do not fit {capacity} tokens and {self.chars} characters")
        by = self._splitter(None, self.chars) if long else self._splitter(False, capacity)
        return [chunk for at, piece in by.chunk_indices(text) if piece.strip()
                for chunk in self._fit(document, start + at, piece, capacity, depth + 1)]

    def _splitter(self, markdown: bool | None, capacity: int):
        """By tokens (Markdown or text), or by characters when `markdown` is None."""
        key = (markdown, capacity)
        if key not in self._splitters:
            splitters = need("semantic_text_splitter")
            if markdown is None:
                self._splitters[key] = splitters.TextSplitter(capacity)
            else:
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
