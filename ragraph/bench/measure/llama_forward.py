"""A Llama-shaped decoder forward pass with random weights in plain PyTorch, for timing only.

It is not a model (the weights are random, the output meaningless) but it does a model's work per
step: the same matmul shapes, RMSNorm, grouped-query attention (F.scaled_dot_product_attention)
over a preallocated KV cache, a gated-SiLU MLP, and the LM head on each sequence's last token only,
as a serving engine computes it. Rotary embeddings are left out: elementwise work on q and k, small
next to the matmuls. No fused serving kernels (paged attention, FlashInfer): what plain PyTorch on
the GPU does, which is what the profile says it measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.runtime.llm.sim.shape import ModelShape


@dataclass(frozen=True)
class Layer:
    qkv: object  # torch.Tensor (heads + 2 kv_heads) * head_dim x hidden
    out: object  # hidden x heads * head_dim
    gate_up: object  # 2 * intermediate x hidden
    down: object  # hidden x intermediate
    norm_attn: object
    norm_mlp: object


class RandomLlama:
    """Random weights of `shape` on `device` in `dtype`; `step` runs one forward pass."""

    def __init__(self, shape: ModelShape, device: str, dtype, seed: int = 0) -> None:
        import torch

        self.shape, self.device, self.dtype = shape, device, dtype
        gen = torch.Generator(device=device).manual_seed(seed)

        def weight(*size: int):
            # 0.02: Llama's initializer range, so activations stay finite through the layers.
            return torch.randn(*size, generator=gen, device=device, dtype=dtype) * 0.02

        s = shape
        width = s.heads * s.head_dim
        self.layers = [Layer(qkv=weight((s.heads + 2 * s.kv_heads) * s.head_dim, s.hidden),
                             out=weight(s.hidden, width),
                             gate_up=weight(2 * s.intermediate, s.hidden),
                             down=weight(s.hidden, s.intermediate),
                             norm_attn=torch.ones(s.hidden, device=device, dtype=dtype),
                             norm_mlp=torch.ones(s.hidden, device=device, dtype=dtype))
                       for _ in range(s.layers)]
        self.embed = weight(s.vocab, s.hidden)
        self.head = weight(s.vocab, s.hidden)

    def new_cache(self, batch: int, length: int) -> list[tuple[object, object]]:
        """K and V of every layer for `batch` sequences of up to `length` tokens."""
        import torch

        size = (batch, self.shape.kv_heads, length, self.shape.head_dim)
        return [(torch.zeros(size, device=self.device, dtype=self.dtype),
                 torch.zeros(size, device=self.device, dtype=self.dtype))
                for _ in self.layers]

    def step(self, ids, cache, pos: int):
        """Tokens `ids` (batch x new) written at `pos` of `cache`; the next token of each
        sequence (greedy over the last position's logits)."""
        x = self.embed[ids]
        for layer, kv in zip(self.layers, cache, strict=True):
            x = self._layer(x, layer, kv, pos)
        return (x[:, -1:] @ self.head.t()).argmax(-1)

    def _layer(self, x, p: Layer, kv, pos: int):
        import torch.nn.functional as F

        s = self.shape
        batch, new, _ = x.shape
        h = F.rms_norm(x, (s.hidden,), p.norm_attn, 1e-5)
        q, k, v = (h @ p.qkv.t()).split(
            [s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], dim=-1)
        q = q.view(batch, new, s.heads, s.head_dim).transpose(1, 2)
        k_cache, v_cache = kv
        k_cache[:, :, pos:pos + new] = k.view(batch, new, s.kv_heads, s.head_dim).transpose(1, 2)
        v_cache[:, :, pos:pos + new] = v.view(batch, new, s.kv_heads, s.head_dim).transpose(1, 2)
        # Causal within the new tokens; a single new token attends to the whole cache.
        a = F.scaled_dot_product_attention(q, k_cache[:, :, :pos + new],
                                           v_cache[:, :, :pos + new], is_causal=new > 1,
                                           enable_gqa=True)
        x = x + a.transpose(1, 2).reshape(batch, new, s.heads * s.head_dim) @ p.out.t()
        h = F.rms_norm(x, (s.hidden,), p.norm_mlp, 1e-5)
        gate, up = (h @ p.gate_up.t()).chunk(2, dim=-1)
        return x + (F.silu(gate) * up) @ p.down.t()
