"""Benchmark of the embedded llama.cpp engine (CPU, Gemma-3-270M Q4_K_M by default).

1. Aggregate decode tokens/s at 1, 4, 8, 16 concurrent sequences (one llama_decode per step for
   all of them) vs the same requests one after another through `Llama.create_completion`.
2. Batch invariance: do greedy outputs change when a sequence is decoded alongside others?
3. Prefill saved by prefix reuse on a continuation (tokens and time).

    python benchmarks/llm_bench.py [--threads 2] [--max-tokens 32] [--model PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from ragraph.ir import Sampling
from ragraph.runtime.llm import GenerationRequest
from ragraph.runtime.llm.llamacpp.engine import LlamaCppConfig, LlamaCppEngine, default_model_path
from ragraph.runtime.llm.llamacpp.reference import reference_llama

PROMPTS = [
    "The history of the city of Paris begins", "Water boils at a temperature of",
    "The first president of the United States was", "In 1969, the Apollo 11 mission",
    "Photosynthesis is the process by which green plants", "The Great Wall of China was built",
    "Mount Everest is the highest mountain", "The French Revolution started in",
    "Albert Einstein was born in", "The Amazon river flows through",
    "The human heart has four chambers:", "Shakespeare wrote many plays, including",
    "The Roman Empire fell in", "Jupiter is the largest planet in",
    "The theory of evolution was proposed by", "The Pacific Ocean is the largest",
]
DOC = (
    "Paris is the capital and largest city of France. With an estimated population of over two "
    "million residents, it is the centre of the Île-de-France region. The city is a major railway, "
    "highway and air-transport hub served by two international airports. Paris is known for its "
    "museums and architectural landmarks: the Louvre, the Eiffel Tower, the Musée d'Orsay and the "
    "cathedral of Notre-Dame. The Seine river flows through the city, dividing it into the Left "
    "Bank and the Right Bank. "
) * 4


def sequential(llm: Any, prompts: list[str], n: int) -> list[tuple[float, str, int]]:
    """(seconds, text, completion tokens) of each prompt through create_completion, in turn."""
    out = []
    for prompt in prompts:
        llm.reset()  # no KV reuse across prompts: each is computed from an empty cache
        t0 = time.perf_counter()
        r = llm.create_completion(prompt, max_tokens=n, temperature=0)
        out.append((time.perf_counter() - t0, r["choices"][0]["text"], r["usage"]["completion_tokens"]))
    return out


async def concurrent(engine: LlamaCppEngine, prompts: list[str], n: int, tag: str) -> tuple[float, list]:
    t0 = time.perf_counter()
    streams = [engine.submit(GenerationRequest(f"{tag}{i}", prompt=p,
                                               params=Sampling(max_tokens=n)))
               for i, p in enumerate(prompts)]
    results = [await s.result() for s in streams]
    return time.perf_counter() - t0, results


async def prefix_reuse(model: str, threads: int) -> dict[str, float]:
    """Continue a generation over a ~600-token document with and without the retired-KV cache."""
    params = Sampling(max_tokens=16)
    timings: dict[str, float] = {}
    for keep in (16, 0):
        cfg = LlamaCppConfig(model_path=model, n_threads=threads, prefix_slots=keep)
        async with LlamaCppEngine(cfg) as engine:
            first = await engine.submit(GenerationRequest("p1", prompt=DOC + "Question: where is Paris?\nAnswer:", params=params)).result()
            cont = DOC + "Question: where is Paris?\nAnswer:" + first.text + "\nQuestion: what river?\nAnswer:"
            t0 = time.perf_counter()
            r = await engine.submit(GenerationRequest("p2", prompt=cont, params=Sampling(max_tokens=1))).result()
            timings[f"keep{keep}_s"] = time.perf_counter() - t0
            timings[f"keep{keep}_cached"] = r.cached_tokens
            timings["prompt_tokens"] = r.prompt_tokens
    return timings


def first_token_difference(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


async def main(args: argparse.Namespace) -> None:
    model = args.model or default_model_path()
    llm = reference_llama(model, n_ctx=2048, n_threads=args.threads)
    # Alone in an empty KV cache (retired sequences freed at once): the create_completion setting.
    clean = LlamaCppConfig(model_path=model, n_threads=args.threads, prefix_slots=0)
    async with LlamaCppEngine(clean) as engine:
        solo = [(await concurrent(engine, [p], args.max_tokens, f"solo{i}-"))[1][0]
                for i, p in enumerate(PROMPTS)]
    reference = sequential(llm, PROMPTS, args.max_tokens)
    async with LlamaCppEngine(LlamaCppConfig(model_path=model, n_threads=args.threads)) as engine:
        batched16 = await throughput(engine, llm, args)
    report_invariance(reference, solo, batched16)
    reuse = await prefix_reuse(model, args.threads)
    print(f"\nprefix reuse on a continuation ({int(reuse['prompt_tokens'])} prompt tokens): "
          f"{int(reuse['keep16_cached'])} tokens reused; prefill + 1 token "
          f"{reuse['keep16_s'] * 1000:.0f} ms with reuse vs {reuse['keep0_s'] * 1000:.0f} ms without "
          f"({(reuse['keep0_s'] - reuse['keep16_s']) * 1000:.0f} ms saved)")


async def throughput(engine: LlamaCppEngine, llm: Any, args: argparse.Namespace) -> list:
    """Each concurrency level right after its sequential baseline, so that load from other
    processes on the shared cores affects both sides alike."""
    await concurrent(engine, ["Warm up"], 4, "w")
    print(f"decode throughput, {args.threads} threads, {args.max_tokens} new tokens per request")
    print(f"{'conc':>4} {'engine tok/s':>12} {'sequential tok/s':>16} {'ratio':>6}")
    results: list = []
    for c in (1, 4, 8, 16):
        seq = sequential(llm, PROMPTS[:c], args.max_tokens)
        seq_tps = sum(s[2] for s in seq) / sum(s[0] for s in seq)
        wall, results = await concurrent(engine, PROMPTS[:c], args.max_tokens, f"c{c}-")
        tps = sum(r.completion_tokens for r in results) / wall
        print(f"{c:>4} {tps:>12.1f} {seq_tps:>16.1f} {tps / seq_tps:>5.2f}x", flush=True)
    return results


def report_invariance(seq: list, solo: list, batched: list) -> None:
    ref = [s[1] for s in seq]
    solo_diff = [i for i, r in enumerate(solo) if r.text != ref[i]]
    batch_diff = [i for i, r in enumerate(batched) if r.text != solo[i].text]
    print("\nbatch invariance (greedy):")
    n = len(PROMPTS)
    print(f"  engine alone (empty cache) vs create_completion: {n - len(solo_diff)}/{n} identical")
    print(f"  engine in a batch of 16 vs alone:               {n - len(batch_diff)}/{n} identical")
    for i in batch_diff:
        at = first_token_difference(batched[i].token_ids, solo[i].token_ids)
        print(f"    prompt {i}: first different token {at} of {len(solo[i].token_ids)}: "
              f"{solo[i].text[:60]!r}... vs {batched[i].text[:60]!r}...")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--model", default=None)
    asyncio.run(main(ap.parse_args()))
