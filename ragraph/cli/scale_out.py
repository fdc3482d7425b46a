"""The scale-out flags `run` and `bench` share: a Ray cluster for the index, server replicas."""

from __future__ import annotations

import argparse

from ragraph.errors import ConfigError
from ragraph.runtime.distributed.options import ScaleConfig


def add_arguments(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The flags, in a group of their own (returned: `serve` adds its Ray flags to it)."""
    group = p.add_argument_group("scale-out (Ray; needs the extra: pip install \"ragraph[ray]\")")
    group.add_argument("--ray", metavar="ADDRESS",
                       help="run the index's lists on this Ray cluster (HOST:PORT of `ray start "
                       "--head`, or auto); the index directory must be on a path every node reads")
    group.add_argument("--shards", type=int, help="shard actors for the lists (2)")
    group.add_argument("--replicate", type=float,
                       help="share of the lists, the largest, held by two shards (0.1)")
    group.add_argument("--shard-cpus", type=float,
                       help="Ray CPUs per shard actor; faiss threads = its whole part (1)")
    group.add_argument("--replicas", metavar="URLS",
                       help="comma-separated OpenAI-compatible server URLs (with --engine openai): "
                       "prefix-aware routing, least-loaded otherwise, failover when one dies")
    return group


def fields(args: argparse.Namespace) -> dict[str, object]:
    """The knobs of the flags above (None: not given)."""
    replicas = None if args.replicas is None else tuple(
        u.strip() for u in args.replicas.split(",") if u.strip())
    return {"ray": args.ray, "shards": args.shards, "replicate": args.replicate,
            "shard_cpus": args.shard_cpus, "replicas": replicas}


def check(args: argparse.Namespace, scale: ScaleConfig) -> None:
    """--shards and --replicate shape the shards of a Ray cluster: one must be given (by flag
    or config file) for them to mean anything."""
    if scale.ray is None and (args.shards is not None or args.replicate is not None):
        raise ConfigError("--shards", "--shards and --replicate need --ray ADDRESS")
