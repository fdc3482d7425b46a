"""A roofline GPU cost model for the simulated LLM engine (RAGO-style).

Defaults: Llama-3.1-8B in bf16 on one NVIDIA H100 SXM (80 GB HBM3). Every constant says where it
comes from. These are estimates, not measurements, and a real H100 departs from them both ways
(docs/benchmarks/code-figures.md#the-simulated-engine), so the simulated engine uses a measured
profile where it has one (profiled.py) and this model outside it. Either way results are labelled simulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ragraph.errors import ConfigError
from ragraph.runtime.llm.sim.shape import ModelShape


class LlmCostModel(Protocol):
    """Seconds of one continuous-batching engine step, and how the model is named in output."""

    @property
    def label(self) -> str: ...

    def step_s(self, prefill_tokens: int, decode_batch: int, context_tokens: int) -> float: ...

    def prefill_s(self, prompt_tokens: int) -> float: ...

    def decode_step_s(self, batch: int, context_tokens: int) -> float: ...


@dataclass(frozen=True)
class GpuCostModel:
    """Time of one engine step = overhead + max(memory time, compute time).

    A step advances every running sequence by one token (decode) and may also process prompt
    tokens of newly admitted sequences (prefill), as a continuous-batching server does.
    """

    # Llama-3.1-8B has 8.03e9 parameters; bf16 is 2 bytes each -> 16.06 GB read per forward pass.
    weight_bytes: float = 16.06e9
    # H100 SXM HBM3 bandwidth: 3.35 TB/s (NVIDIA datasheet).
    hbm_bytes_per_s: float = 3.35e12
    # KV cache per token: 2 (K and V) x 32 layers x 8 KV heads (GQA) x 128 head dim x 2 bytes
    # = 131,072 bytes = 128 KiB, read once per decode step for every token in context.
    kv_bytes_per_token: float = 131072.0
    # A forward pass costs ~2 FLOPs per parameter per token: 2 x 8.03e9.
    flops_per_token: float = 2 * 8.03e9
    # H100 SXM dense bf16 peak: ~989 TFLOP/s (NVIDIA datasheet, without sparsity).
    peak_flops_per_s: float = 989e12
    # Prefill reaches 40-60% of peak in practice; 50% gives ~33 ms per 1,000 prompt tokens.
    prefill_utilization: float = 0.5
    # Kernel launch, sampling and scheduling per step: ~1 ms (engines report ~6-8 ms inter-token
    # latency at low batch, of which ~4.8 ms is the weight read).
    step_overhead_s: float = 1e-3
    # What the constants describe, for output.
    name: str = "Llama-3.1-8B bf16 on an H100 SXM"

    @classmethod
    def for_shape(cls, shape: ModelShape, gpu: str) -> GpuCostModel:
        """The roofline of another model shape; the GPU constants stay the H100's."""
        return cls(weight_bytes=float(shape.weight_bytes),
                   kv_bytes_per_token=float(shape.kv_bytes_per_token),
                   flops_per_token=shape.flops_per_token,
                   name=f"{shape.name} on {gpu}, H100 datasheet constants")

    @property
    def label(self) -> str:
        return f"roofline model of {self.name}, not measured"

    def __post_init__(self) -> None:
        for name in ("weight_bytes", "hbm_bytes_per_s", "flops_per_token", "peak_flops_per_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(name, f"must be > 0, got {getattr(self, name)}")
        if self.kv_bytes_per_token < 0:
            raise ConfigError("kv_bytes_per_token", "must be >= 0")
        if not 0 < self.prefill_utilization <= 1:
            raise ConfigError("prefill_utilization", "must be in (0, 1]")
        if self.step_overhead_s < 0:
            raise ConfigError("step_overhead_s", "must be >= 0")

    def memory_s(self, context_tokens: int) -> float:
        """Reading the weights once plus the KV cache of `context_tokens` tokens."""
        return self.weight_bytes / self.hbm_bytes_per_s + self.kv_read_s(context_tokens)

    def kv_read_s(self, context_tokens: int) -> float:
        """Reading the KV cache of `context_tokens` tokens once."""
        return context_tokens * self.kv_bytes_per_token / self.hbm_bytes_per_s

    def compute_s(self, tokens: int) -> float:
        """Matrix work for `tokens` tokens at the prefill utilization."""
        return tokens * self.flops_per_token / (self.peak_flops_per_s * self.prefill_utilization)

    def step_s(self, prefill_tokens: int, decode_batch: int, context_tokens: int) -> float:
        """One step: `prefill_tokens` new prompt tokens plus one token for each of `decode_batch`
        running sequences whose total context is `context_tokens`."""
        if prefill_tokens == 0 and decode_batch == 0:
            return 0.0
        memory = self.memory_s(context_tokens)
        compute = self.compute_s(prefill_tokens + decode_batch)
        return self.step_overhead_s + max(memory, compute)

    def prefill_s(self, prompt_tokens: int) -> float:
        """A prefill-only step of `prompt_tokens` tokens."""
        return self.step_s(prompt_tokens, 0, 0)

    def decode_step_s(self, batch: int, context_tokens: int) -> float:
        """A decode-only step of `batch` sequences with `context_tokens` tokens of context in all."""
        return self.step_s(0, batch, context_tokens)
