"""`ragraph calibrate`: measure this GPU's prefill and decode-step times into a profile file.

    ragraph calibrate --out h100.json                     # Llama-3.1-8B shape, the full grid
    ragraph bench --engine sim --profile h100.json        # the simulated engine on that profile
    ragraph calibrate --device cpu --shape tiny --out /tmp/tiny.json   # a smoke test on a CPU
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ragraph.cli.options import numbers
from ragraph.console import new_console


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "calibrate", help="measure a GPU profile (prefill and decode-step times) for --engine sim",
        description="Time a model-shaped forward pass (random weights; bf16 and CUDA graphs for "
        "decode on a GPU) over a grid of prefill tokens, decode batch sizes and contexts, and "
        "write a profile file for `ragraph run/bench --engine sim --profile FILE`.",
    )
    p.add_argument("--out", "-o", type=Path, default=Path("gpu-profile.json"),
                   help="profile file to write (gpu-profile.json)")
    p.add_argument("--shape", default="llama-3.1-8b",
                   help="llama-3.1-8b (default), tiny, or overrides such as "
                   "'layers=16,hidden=2048' or 'tiny,layers=4'")
    p.add_argument("--device", choices=("cuda", "cpu"),
                   help="cuda when present (default), else cpu (small shapes only)")
    p.add_argument("--prefill", help="comma-separated prompt tokens (16 ... 8192)")
    p.add_argument("--batches", help="comma-separated decode batch sizes (1 ... 256)")
    p.add_argument("--contexts", help="comma-separated KV tokens a sequence (32 ... 8192)")
    p.add_argument("--reps", type=int, help="timed runs a point, the median is kept (10)")
    p.add_argument("--warmup", type=int, help="untimed runs before them (3)")
    p.add_argument("--max-kv-tokens", type=int,
                   help="skip decode points with more KV tokens (default: what fits)")
    p.set_defaults(func=run)


def grid_from(args: argparse.Namespace):
    from ragraph.bench.measure.calibrate import CalibrationGrid

    overrides = {
        "prefill": numbers(args.prefill, "--prefill", int),
        "batches": numbers(args.batches, "--batches", int),
        "contexts": numbers(args.contexts, "--contexts", int), "reps": args.reps,
        "warmup": args.warmup, "max_kv_tokens": args.max_kv_tokens,
    }
    return CalibrationGrid(**{k: v for k, v in overrides.items() if v is not None})


def run(args: argparse.Namespace) -> int:
    from ragraph.bench.measure.calibrate import Calibration, calibrate
    from ragraph.runtime.devices import cuda_available
    from ragraph.runtime.llm.sim.profile import write_profile
    from ragraph.runtime.llm.sim.shape import parse_shape

    device = args.device or ("cuda" if cuda_available() else "cpu")
    config = Calibration(parse_shape(args.shape), device, grid_from(args), name=args.out.stem)
    console = new_console(highlight=False)
    console.print(f"calibrating {config.shape.name} on {device} "
                  f"({config.shape.params / 1e9:.2f}B parameters, random weights)")
    profile = calibrate(config, console.print)
    write_profile(profile, args.out)
    console.print(f"wrote {args.out}: {len(profile.prefill)} prefill and {len(profile.decode)} "
                  f"decode points; use it with --engine sim --profile {args.out}")
    return 0
