"""Batch-invariant query embedding with integer matrix products: the `int8` query precision.

A float matrix product rounds its partial sums, and the kernel a library picks (its blocking, a
row's place in a tile, how threads split the work) depends on the shape of the whole batch, so a
text's float32 vector depends on what it was batched with (embedder.py). Integer products with
int32 sums are exact: every kernel, tile, thread count and CPU gives the same integers. Here each
linear layer of a BERT encoder, nearly all of its work, runs that way: weights rounded to int8 per
output channel once, activations rounded per token (a row's scale is its own, never its
batch's). What stays in float32 is row by row (LayerNorm, GELU, the bias) or text by text at the
text's own shapes (attention, pooling: packed.py), so it cannot see the batch either. The vectors
are not float64's (the rounding moves them; docs/benchmarks/embedders.md says how far), which is
why an index records which of the two its queries use (embedder_spec.py).

The kernel is detected, not assumed: `torch._int_mm` where it sums exactly (a probe on extreme
values checks that: int8 kernels without VNNI or AMX may saturate 16-bit pair sums), else float32
products of the same small integers cut into slices whose sums stay below 2**24, which are exact
too, and give the same integers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ragraph.runtime.retrieval.embed.packed import Layer, attend, check_packable

LEVELS = 127  # int8 values in [-127, 127]: symmetric, so -x rounds to -(round x)
# Float32 holds every integer below 2**24 exactly: products of two values of at most LEVELS,
# summed over this many terms, never leave that range.
EXACT_FLOAT_TERMS = (1 << 24) // (LEVELS * LEVELS)


def int8_layers(model) -> list[Layer]:
    """The encoder layers of a sentence-transformers BERT model (float32) with int8 products,
    for `packed.encode_packed`."""
    check_packable(model)
    bert = model[0].auto_model
    heads = bert.config.num_attention_heads
    return [functools.partial(_layer, Int8Layer.of(layer), heads) for layer in bert.encoder.layer]


@dataclass(frozen=True)
class Int8Linear:
    weight: Any  # int8 [in, out]: the float weight / scale, rounded
    scale: Any  # float32 [out]: each output channel's largest weight / LEVELS
    bias: Any  # float32 [out]

    @staticmethod
    def of(*linears) -> Int8Linear:
        """One layer whose outputs are those of `linears` side by side (query, key, value)."""
        import torch

        weight = torch.cat([m.weight.detach() for m in linears]).to(torch.float32)
        scale = weight.abs().amax(1).clamp_min(torch.finfo(torch.float32).tiny) / LEVELS
        rounded = torch.round(weight / scale[:, None]).to(torch.int8).t().contiguous()
        bias = torch.cat([m.bias.detach() for m in linears]).to(torch.float32)
        return Int8Linear(rounded, scale, bias)

    def __call__(self, x):
        """x [tokens, in] float32 -> [tokens, out]; each row depends on that row alone."""
        import torch

        # Each row in units of its own step (its largest value / LEVELS), rounded.
        step = x.abs().amax(1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny) / LEVELS
        values = torch.round(x / step).to(torch.int8)
        sums = exact_matmul(values, self.weight).to(torch.float32)
        return sums * step * self.scale + self.bias


@dataclass(frozen=True)
class Int8Layer:
    """A BERT encoder layer's linear parts in int8 and its float32 norms and activation."""

    qkv: Int8Linear
    attention_out: Int8Linear
    attention_norm: Any
    intermediate: Int8Linear
    activation: Any
    output: Int8Linear
    output_norm: Any

    @staticmethod
    def of(layer) -> Int8Layer:
        attention = layer.attention.self
        return Int8Layer(
            Int8Linear.of(attention.query, attention.key, attention.value),
            Int8Linear.of(layer.attention.output.dense), layer.attention.output.LayerNorm,
            Int8Linear.of(layer.intermediate.dense), layer.intermediate.intermediate_act_fn,
            Int8Linear.of(layer.output.dense), layer.output.LayerNorm)


def _layer(layer: Int8Layer, heads: int, x, lengths: list[int]):
    width = x.shape[1]
    qkv = layer.qkv(x)
    q, k, v = qkv[:, :width], qkv[:, width:2 * width], qkv[:, 2 * width:]
    mid = layer.attention_norm(layer.attention_out(attend(q, k, v, lengths, heads)) + x)
    return layer.output_norm(layer.output(layer.activation(layer.intermediate(mid))) + mid)


def exact_matmul(a, b):
    """The exact int32 product of int8 matrices a [m, k] and b [k, n] (|values| <= LEVELS)."""
    import torch

    if int_mm_is_exact(a.device.type):
        rows = a.shape[0]
        if a.device.type == "cuda" and (rows <= 16 or rows % 8):
            # cuBLASLt's int8 product wants more than 16 rows, a multiple of 8: zero rows are
            # exact, and sliced off.
            a = torch.cat([a, a.new_zeros((max(24, rows + 7) // 8 * 8 - rows, a.shape[1]))])
        return torch._int_mm(a, b)[:rows]
    return _float_matmul(a, b)


def _float_matmul(a, b):
    import torch

    total = None
    for start in range(0, a.shape[1], EXACT_FLOAT_TERMS):
        part = a[:, start:start + EXACT_FLOAT_TERMS].to(torch.float32) @ \
            b[start:start + EXACT_FLOAT_TERMS].to(torch.float32)
        part = part.to(torch.int32)
        total = part if total is None else total + part
    return total


@functools.cache
def int_mm_is_exact(device: str) -> bool:
    """Whether torch's int8 product sums exactly on this device: checked on the values where a
    kernel that saturates would show it (every pair of products at +-127 * 127), and on random
    ones; false where torch has no int8 product for the device."""
    import torch

    generator = torch.Generator().manual_seed(0)
    k = 2 * EXACT_FLOAT_TERMS
    a = torch.randint(-LEVELS, LEVELS + 1, (32, k), generator=generator, dtype=torch.int8)
    b = torch.randint(-LEVELS, LEVELS + 1, (k, 64), generator=generator, dtype=torch.int8)
    a[:8], b[:, :8] = LEVELS, LEVELS
    a[8:16], b[:, 8:16] = -LEVELS, -LEVELS
    want = a.to(torch.int64) @ b.to(torch.int64)
    try:
        got = torch._int_mm(a.to(device), b.to(device)).cpu()
    except (AttributeError, RuntimeError, NotImplementedError):
        return False
    return bool(torch.equal(got.to(torch.int64), want))


def kernel(device: str = "cpu") -> str:
    """Which integer product runs on `device`, in words (for the benchmark pages)."""
    if int_mm_is_exact(device):
        return "torch._int_mm (int8, int32 sums)"
    return "float32 products of int8 values (exact slices)"
