"""`ragraph calibrate`: measure a GPU profile for the simulated engine (profile.py's format).

Prefill: one sequence of n tokens into an empty KV cache, eager (engines run prefills eagerly).
Decode: one new token for each of `batch` sequences holding `context` tokens of KV cache, replayed
in a CUDA graph as serving engines replay decode batches. Each point is the median of `reps` timed
runs after `warmup` untimed ones. Decode points whose KV cache would not fit are skipped and named
in the profile's note. On a CPU (tiny shapes, float32) the same code runs eagerly, which is how the
tests exercise it end to end.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date

from ragraph.bench.measure.llama_forward import RandomLlama
from ragraph.errors import ConfigError
from ragraph.runtime.llm.sim.costmodel import GpuCostModel
from ragraph.runtime.llm.sim.profile import DecodePoint, GpuProfile, PrefillPoint
from ragraph.runtime.llm.sim.shape import ModelShape

# Memory kept free beside the weights and KV caches on a GPU: prefill activations of 8,192 tokens
# (~0.5 GB of MLP activations for Llama-3.1-8B), CUDA-graph pools and the allocator's slack.
GPU_MARGIN_BYTES = 6 * 2**30
CPU_KV_BYTES = 256 * 2**20  # a CPU run is a smoke test: small caches
CPU_MAX_WEIGHT_BYTES = 2**30


@dataclass(frozen=True)
class CalibrationGrid:
    prefill: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
    batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    contexts: tuple[int, ...] = (32, 128, 512, 1024, 2048, 4096, 8192)  # tokens a sequence
    reps: int = 10
    warmup: int = 3
    max_kv_tokens: int | None = None  # None: what fits in the device's free memory

    def __post_init__(self) -> None:
        for name in ("prefill", "batches", "contexts"):
            values = getattr(self, name)
            if not values or min(values) < 1:
                raise ConfigError(f"--{name}", "give positive integers")
            object.__setattr__(self, name, tuple(sorted(set(values))))
        if self.reps < 1 or self.warmup < 0:
            raise ConfigError("--reps", "needs at least one timed run")
        if self.max_kv_tokens is not None and self.max_kv_tokens < 1:
            raise ConfigError("--max-kv-tokens", f"must be positive, got {self.max_kv_tokens}")


@dataclass(frozen=True)
class Calibration:
    shape: ModelShape
    device: str  # "cuda" (bf16, CUDA graphs) or "cpu" (float32, eager)
    grid: CalibrationGrid = CalibrationGrid()
    name: str = "gpu-profile"  # the profile's name (its file's stem)

    def __post_init__(self) -> None:
        if self.device not in ("cuda", "cpu"):
            raise ConfigError("--device", f"must be cuda or cpu, got {self.device!r}")
        # float32 on a CPU: 4 bytes a parameter.
        if self.device == "cpu" and self.shape.params * 4 > CPU_MAX_WEIGHT_BYTES:
            raise ConfigError("--shape", f"{self.shape.name} has {self.shape.params / 1e9:.1f}B "
                              "parameters: measure it on a GPU; on a CPU use a small shape "
                              "(--shape tiny)")


def calibrate(config: Calibration, say: Callable[[str], None] = lambda _: None) -> GpuProfile:
    """Measure every grid point on `config.device`; `say` gets one line per point."""
    import torch

    cuda = config.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise ConfigError("--device", "cuda requested but no CUDA device is available")
    dtype = torch.bfloat16 if cuda else torch.float32
    shape = replace(config.shape, dtype_bytes=torch.finfo(dtype).bits // 8)
    model = RandomLlama(shape, config.device, dtype)
    roofline = GpuCostModel.for_shape(shape, "this device")
    timer = _Timer(cuda, config.grid.reps, config.grid.warmup)
    with torch.inference_mode():
        prefill = [_prefill(model, n, timer, roofline, say) for n in config.grid.prefill]
        decode, skipped = _decode_grid(model, config.grid, timer, roofline, say, cuda)
    return GpuProfile(
        config.name, model=shape.name, gpu=_device_name(cuda), dtype=str(dtype).removeprefix(
            "torch."), method=_method(config.grid, cuda, torch.__version__), note=_note(skipped),
        shape=shape, prefill=tuple(prefill), decode=tuple(decode))


def _prefill(model: RandomLlama, tokens: int, timer: _Timer, roofline: GpuCostModel,
             say: Callable[[str], None]) -> PrefillPoint:
    import torch

    cache = model.new_cache(1, tokens)
    ids = torch.randint(0, model.shape.vocab, (1, tokens), device=model.device)
    seconds = timer.time(lambda: model.step(ids, cache, 0))
    say(f"prefill {tokens:6d} tokens: {seconds * 1e3:8.2f} ms  "
        f"(roofline {roofline.prefill_s(tokens) * 1e3:.2f})")
    return PrefillPoint(tokens, round(seconds * 1e3, 3))


def _decode_grid(model: RandomLlama, grid: CalibrationGrid, timer: _Timer, roofline: GpuCostModel,
                 say: Callable[[str], None], cuda: bool) -> tuple[list[DecodePoint], list[str]]:
    budget = grid.max_kv_tokens or _kv_budget_tokens(model.shape, cuda)
    points, skipped = [], []
    for context in grid.contexts:
        for batch in grid.batches:
            if batch * (context + 1) > budget:
                skipped.append(f"batch {batch} x context {context}")
                continue
            seconds = _decode(model, batch, context, timer, cuda)
            say(f"decode batch {batch:4d} context {context:6d}: {seconds * 1e3:8.2f} ms  "
                f"(roofline {roofline.decode_step_s(batch, batch * context) * 1e3:.2f})")
            points.append(DecodePoint(batch, context, round(seconds * 1e3, 3)))
    return points, skipped


def _decode(model: RandomLlama, batch: int, context: int, timer: _Timer, cuda: bool) -> float:
    import torch

    cache = model.new_cache(batch, context + 1)
    ids = torch.randint(0, model.shape.vocab, (batch, 1), device=model.device)

    def run() -> object:
        return model.step(ids, cache, context)

    seconds = timer.time(_cuda_graph(run) if cuda else run)
    if cuda:  # the graph and the cache are gone now: give their memory back for the next shape
        del cache, run
        torch.cuda.empty_cache()
    return seconds


def _cuda_graph(run: Callable[[], object]) -> Callable[[], object]:
    """`run` captured once into a CUDA graph (after warm-up on a side stream, as torch asks)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph.replay


def _kv_budget_tokens(shape: ModelShape, cuda: bool) -> int:
    import torch

    if not cuda:
        return CPU_KV_BYTES // shape.kv_bytes_per_token
    torch.cuda.empty_cache()  # the prefills' blocks, cached by torch, count as used otherwise
    free = torch.cuda.mem_get_info()[0] - GPU_MARGIN_BYTES
    return max(1, free // shape.kv_bytes_per_token)


class _Timer:
    """Median seconds of `reps` runs after `warmup`; CUDA events on a GPU (device time)."""

    def __init__(self, cuda: bool, reps: int, warmup: int) -> None:
        self.cuda, self.reps, self.warmup = cuda, reps, warmup

    def time(self, run: Callable[[], object]) -> float:
        for _ in range(self.warmup):
            run()
        once = self._cuda_once if self.cuda else self._cpu_once
        return statistics.median(once(run) for _ in range(self.reps))

    @staticmethod
    def _cuda_once(run: Callable[[], object]) -> float:
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3

    @staticmethod
    def _cpu_once(run: Callable[[], object]) -> float:
        began = time.perf_counter()
        run()
        return time.perf_counter() - began


def _device_name(cuda: bool) -> str:
    import torch

    if cuda:
        return torch.cuda.get_device_name()
    from ragraph.bench.measure.machine import detect

    return f"CPU ({detect().describe()})"


def _method(grid: CalibrationGrid, cuda: bool, torch_version: str) -> str:
    decode = "replayed in a CUDA graph" if cuda else "eager"
    return (f"ragraph calibrate, {date.today().isoformat()}, torch {torch_version}: random "
            f"weights, plain PyTorch kernels, median of {grid.reps} timed runs after "
            f"{grid.warmup} untimed ones. prefill: one sequence into an empty "
            "KV cache, eager, logits of the last token only. decode: one new token for each "
            f"sequence of the batch, each with `context` tokens of KV cache, {decode}.")


def _note(skipped: list[str]) -> str:
    if not skipped:
        return "All points measured."
    return ("All points measured. Skipped, their KV cache over the memory budget: "
            + ", ".join(skipped) + ".")
