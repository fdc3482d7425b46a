"""Command-line pieces shared by several subcommands."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ragraph.errors import ConfigError


def add_gpu_flags(p: argparse.ArgumentParser) -> None:
    """`--hot-cache/--no-hot-cache` and `--profile`, as `run` and `bench` take them."""
    p.add_argument("--hot-cache", action=argparse.BooleanOptionalAction, default=None,
                   help="keep the hottest 20%% of clusters on the GPU and prefetch into it "
                   "(default: on when a CUDA device is present; off on a CPU-only machine)")
    p.add_argument("--profile", metavar="FILE",
                   help="--engine sim: step times from this GPU profile (`ragraph calibrate`); "
                   "default: the shipped H100 / Llama-3.1-8B profile; 'roofline': the datasheet "
                   "model alone")


def numbers(text: str | None, flag: str, cast: Callable[[str], object]) -> tuple | None:
    """`1,2,3` as a tuple of `cast` values; None stays None (the flag was not given)."""
    if text is None:
        return None
    try:
        return tuple(cast(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise ConfigError(flag, f"expected comma-separated numbers, got {text!r}") from err
