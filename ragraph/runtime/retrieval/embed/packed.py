"""BERT query embedding without padding: the texts of a batch are packed into one token matrix.

sentence-transformers pads every text of a batch to the longest one, and the wavefront's batches
mix lengths, so much of a batch's work is padding. Here the linear layers, which are nearly all of the work, run on the
packed tokens of all texts at once, and attention runs per text at its own length, so a text is
computed with the same attention shapes whether it is embedded alone or batched. In float64 the
vectors are bit-identical to sentence-transformers' padded ones after the rounding to float32
(the tests check it). What packing saves: docs/benchmarks/code-figures.md#query-embedding.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from ragraph.errors import SearchIndexError

# An encoder layer over packed texts: (hidden states [tokens, width], the texts' lengths) -> out.
Layer = Callable[..., object]


def packable(model) -> str | None:
    """None when `model` can run packed, else why not (its queries then run padded)."""
    try:
        check_packable(model)
    except SearchIndexError as err:
        return str(err)
    return None


def check_packable(model) -> None:
    """The packed forward reproduces a BERT encoder with mean pooling and normalization only
    (position ids from 0 in every text: BERT's; RoBERTa-style models start after the padding
    id, and a prompt left out of the pooling needs sentence-transformers' own bookkeeping)."""
    modules = [type(m).__name__ for m in model]
    if modules != ["Transformer", "Pooling", "Normalize"]:
        raise SearchIndexError(f"query embedder: expected Transformer, Pooling, Normalize, got {modules}")
    pooling = model[1]  # newer sentence-transformers name the mode, older ones set a flag per mode
    if getattr(pooling, "pooling_mode", None) != "mean" and not getattr(
            pooling, "pooling_mode_mean_tokens", False):
        raise SearchIndexError("query embedder: the packed forward needs mean pooling")
    if not getattr(pooling, "include_prompt", True):
        raise SearchIndexError("query embedder: the packed forward pools over the prompt too")
    bert = model[0].auto_model
    if not hasattr(bert, "encoder") or getattr(bert.config, "model_type", "bert") != "bert":
        raise SearchIndexError("query embedder: the packed forward needs a BERT encoder")


def encode_packed(model, texts: Sequence[str], layers: Sequence[Layer] | None = None
                  ) -> np.ndarray:
    """Normalized embeddings of `texts` (float32 rows) from a sentence-transformers BERT model
    in the model's own precision, or through `layers` (one per encoder layer: packed hidden
    states and the texts' lengths in, the layer's output out) where given (int8.py)."""
    import torch

    transformer = model[0]
    bert = transformer.auto_model
    ids = transformer.tokenizer(list(texts), truncation=True,
                                max_length=transformer.max_seq_length)["input_ids"]
    if not ids:
        return np.empty((0, bert.config.hidden_size), dtype=np.float32)
    lengths = [len(row) for row in ids]
    device = bert.device
    heads = bert.config.num_attention_heads
    if layers is None:
        layers = [functools.partial(_layer, layer, heads) for layer in bert.encoder.layer]
    with torch.inference_mode():
        tokens = torch.tensor([t for row in ids for t in row], device=device).unsqueeze(0)
        positions = torch.cat([torch.arange(n, device=device) for n in lengths]).unsqueeze(0)
        x = bert.embeddings(input_ids=tokens, position_ids=positions,
                            token_type_ids=torch.zeros_like(tokens))[0]
        for layer in layers:
            x = layer(x, lengths)
        pooled = torch.stack([rows.mean(0) for rows in torch.split(x, lengths)]).cpu()
        # Normalized on the CPU, which sums each row's squares the same way at any batch size;
        # CUDA's reduction spreads a row over more or fewer threads as the rows grow in number.
        return torch.nn.functional.normalize(pooled, dim=1).to(torch.float32).numpy()


def _layer(layer, heads: int, x, lengths: list[int]):
    """One BERT encoder layer over packed texts, with the model's own modules."""
    attention = layer.attention.self
    q, k, v = attention.query(x), attention.key(x), attention.value(x)
    x_mid = layer.attention.output(attend(q, k, v, lengths, heads), x)
    return layer.output(layer.intermediate(x_mid), x_mid)


def attend(q, k, v, lengths: list[int], heads: int):
    """Multi-head self-attention of each text over its own tokens (no mask: nothing is padded),
    from the packed queries, keys and values."""
    import torch

    width = q.shape[-1] // heads
    out = []
    start = 0
    for n in lengths:
        qh, kh, vh = (t[start:start + n].view(n, heads, width).transpose(0, 1) for t in (q, k, v))
        weights = torch.softmax((qh @ kh.transpose(1, 2)) * width ** -0.5, dim=-1)
        out.append((weights @ vh).transpose(0, 1).reshape(n, heads * width))
        start += n
    return torch.cat(out)
