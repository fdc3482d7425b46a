#!/usr/bin/env python
"""One mixed llama_decode (a decode token for each of 8 sequences and a prompt for a ninth)
against the embedded engine's two passes (the decode pass, then the prompt pass), on the
engine's own context settings (a KV stream per sequence) and the default Gemma-3-270M.

    .venv/bin/python benchmarks/mixed_pass.py --prompt 32
    .venv/bin/python benchmarks/mixed_pass.py --prompt 256

Figures: docs/benchmarks/code-figures.md#the-llamacpp-engine."""

from __future__ import annotations

import argparse
import statistics
import time

from ragraph.runtime.llm.llamacpp.engine import default_model_path
from ragraph.runtime.llm.llamacpp.model import BatchEntry, ContextShape, LlamaModel

DECODING = 8  # sequences with a decode token in the pass
CONTEXT = 100  # tokens each decoding sequence holds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompt", type=int, default=256, help="prompt tokens of the ninth sequence")
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    shape = ContextShape(n_ctx_seq=1024, n_batch=512, n_seq_max=DECODING + 1,
                         n_threads=args.threads)
    m = LlamaModel(default_model_path(), shape)
    try:
        prompt = [m.bos] + [1000 + i for i in range(CONTEXT - 1)]
        for s in range(DECODING):
            assert m.decode([BatchEntry(t, i, s, i == CONTEXT - 1)
                             for i, t in enumerate(prompt)]) == 0
        decode = [BatchEntry(2000 + s, CONTEXT, s, True) for s in range(DECODING)]
        ninth = [BatchEntry(3000 + i, i, DECODING, i == args.prompt - 1)
                 for i in range(args.prompt)]
        ways = {"two passes": [decode, ninth], "one mixed pass": [decode + ninth]}
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        for r in range(args.rounds):
            for name in (list(ways) if r % 2 else list(ways)[::-1]):
                m.seq_rm(DECODING)
                for s in range(DECODING):
                    m.seq_keep(s, CONTEXT)
                start = time.perf_counter()
                for batch in ways[name]:
                    assert m.decode(batch) == 0
                seconds[name].append(time.perf_counter() - start)
        for name, times in seconds.items():
            print(f"{name}: median {statistics.median(times) * 1e3:.1f} ms, "
                  f"min {min(times) * 1e3:.1f} ms ({args.prompt}-token prompt)")
    finally:
        m.close()


if __name__ == "__main__":
    main()
