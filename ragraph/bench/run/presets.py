"""Bench presets: sizes and protocols for the questions the bench answers.

- `quick`: under 10 minutes on 2 cores (sim) or a few (llama.cpp).
- `llamacpp_preset`: a real LLM engine against a real LangGraph app: the embedded llama.cpp
  (issue 14), or a server both call (`--engine openai --url`, issue 28).
- `ablation_preset`: what each pass is worth.
- `seeds_preset`: HedraRAG's retrieval-heavy regime (issue 15): the largest padded index memory
  allows, IVF4096, nprobe 128/256/512, the paper's online and offline protocols.
"""

from __future__ import annotations

from dataclasses import replace

from ragraph.bench.run.config import LLAMACPP_EXECUTORS, LLAMACPP_WORKFLOWS, BenchConfig


def quick(config: BenchConfig) -> BenchConfig:
    """Sizes that finish in under 10 minutes on 2 cores, index build included. sim: a 400k-vector
    index (IVF512, ~800 vectors per list as in the full IVF4096 x 4M setting), nprobe 128 only,
    offline plus three request rates of 8 s each, no mix, no plots. llamacpp and openai: 16
    questions at 8 in flight."""
    if config.run.llm.engine in ("llamacpp", "openai"):
        return replace(config, offline_requests=16, concurrencies=(8,), quick=True)
    return replace(config, scale=400_000, nprobes=(128,), offline_requests=48, rate_points=3,
                   window_s=8.0, max_online_requests=240, mix=False, plots=False, quick=True)


def llamacpp_preset(config: BenchConfig) -> BenchConfig:
    """A real engine's comparison (issues 14 and 28): HyDE, IRG, oneshot and multistep, 32 real
    questions offline at 8 and 16 in flight, ragraph against a real LangGraph app, on the real
    passages alone (no synthetic padding: retrieval is a small share of a request here)."""
    return replace(config, workflows=LLAMACPP_WORKFLOWS, executors=LLAMACPP_EXECUTORS,
                   concurrencies=(8, 16), rates=config.rates or (), offline_requests=32, scale=0, nprobes=(32,),
                   mix=False, plots=False)


# HedraRAG's workflows, where each pass's worth is measured.
ABLATION_WORKFLOWS = ("oneshot", "hyde", "multistep", "irg")


def ablation_preset(config: BenchConfig) -> BenchConfig:
    """Every pass combination of `bench.run.ablation`, the baselines beside them, on HedraRAG's
    workflows: offline, and online at --rates (or a preset's rates) when given."""
    return replace(config, ablation=True, workflows=ABLATION_WORKFLOWS,
                   rates=config.rates or (), mix=False)


# HedraRAG's evaluation (SOSP 2025, section 7): 38M passages, IVF4096, nprobe 128-512;
# online: 128 questions arriving by Poisson at 4-28 req/s; offline: 1,024 questions at t=0.
SEEDS_WORKFLOWS = ("oneshot", "hyde", "multistep", "irg", "recomp")
SEEDS_RATES = (4.0, 8.0, 12.0, 16.0, 20.0, 24.0, 28.0)
QUICK_RATES = (8.0, 16.0)
# The offline protocol puts every question in at t=0: how many an executor keeps in flight is its
# own setting, so each runs offline at both and its best counts (online runs at the first): at
# 128 the wavefront's batches grow while the thread pool loses some (figures:
# docs/benchmarks/code-figures.md#the-benchs-own-settings).
SEEDS_CONCURRENCIES = (64, 128)
SEEDS_MAX_VECTORS = 38_000_000
BYTES_PER_VECTOR = 384 * 4  # MiniLM, float32 in the IVF-Flat lists
MEMORY_SHARE = 0.55  # of the memory available: the index, with room for its build and the run
# The padding is rounded down to this: the memory available moves by a few hundred MB from one
# run to the next, and each exact size was a new 14 GB index to build (8 minutes) and keep.
SCALE_QUANTUM = 500_000


def seeds_preset(config: BenchConfig, available_bytes: int) -> BenchConfig:
    """The paper's regime at the largest index this machine's memory holds (8M+ vectors on
    24 GiB, 38M on 128 GiB), every executor offline at 64 and 128 in flight. `quick`: 1M
    vectors, IVF1024, nprobe 128 and 256, three workflows, 128 questions offline and two of the
    paper's rates (about 14 minutes on 2 cores). The rates reach past the knees of 2-core
    executors (5-50 req/s): at 4 and 8 req/s every executor kept up, so a 128-request offline
    run whose p95 just passed the SLO (its second half waits from t=0) capped that executor's
    max throughput within the SLO at 8."""
    if config.quick:
        return replace(config, workflows=("oneshot", "multistep", "irg"), scale=1_000_000,
                       nlist=1024, nprobes=(128, 256), offline_requests=128, rates=QUICK_RATES,
                       window_s=16.0, max_online_requests=128, mix=False, plots=False,
                       concurrencies=SEEDS_CONCURRENCIES)
    fits = int(available_bytes * MEMORY_SHARE) // BYTES_PER_VECTOR
    scale = max(fits // SCALE_QUANTUM, 1) * SCALE_QUANTUM
    return replace(config, workflows=SEEDS_WORKFLOWS, scale=min(scale, SEEDS_MAX_VECTORS),
                   nlist=4096, nprobes=(128, 256, 512), offline_requests=1024,
                   rates=SEEDS_RATES, window_s=128 / 4, max_online_requests=128, mix=False,
                   plots=True, concurrencies=SEEDS_CONCURRENCIES)
