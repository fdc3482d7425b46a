"""The query and passage prompts of an embedding model, from its own configuration.

sentence-transformers reads `prompts` from a model's `config_sentence_transformers.json`
(`{"query": "query: ", "passage": "passage: "}`; newer models name the passage side `document`).
Models published before that field existed say their prompts only in the model card; for the two
families practitioners use most, those are written here, from the cards, and used only when the
model's config has none. `--query-prompt` / `--passage-prompt` override both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

PASSAGE_KEYS = ("passage", "document", "corpus", "doc")

# intfloat/e5-*-v2 and multilingual-e5-* model cards: "query: " and "passage: " on every input
# (the -instruct variants take a task instruction instead, so they are not matched).
_E5 = re.compile(r"(^|[/_-])(multilingual-)?e5-(small|base|large)(-v2)?$", re.IGNORECASE)
# BAAI/bge-*-en(-v1.5) model cards: the instruction on queries only, passages bare.
_BGE_EN = re.compile(r"(^|[/_-])bge-(small|base|large)-en(-v1\.5)?$", re.IGNORECASE)
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "


@dataclass(frozen=True)
class Prompts:
    query: str = ""
    passage: str = ""


def model_prompts(name: str, configured: Mapping[str, str]) -> Prompts:
    """The prompts of the model `name` whose sentence-transformers config holds `configured`."""
    query = configured.get("query") or ""
    passage = next((configured[k] for k in PASSAGE_KEYS if configured.get(k)), "")
    if query or passage:
        return Prompts(query, passage)
    return family_prompts(name)


def family_prompts(name: str) -> Prompts:
    """The model card's prompts for an e5 or an English bge model, by its name or directory."""
    short = name.rstrip("/").rsplit("/", 1)[-1]
    if _E5.search(short):
        return Prompts("query: ", "passage: ")
    if _BGE_EN.search(short):
        return Prompts(BGE_QUERY_INSTRUCTION, "")
    return Prompts()
