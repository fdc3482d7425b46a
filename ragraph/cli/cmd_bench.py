"""`ragraph bench`: ragraph and its baselines side by side on a scaled benchmark index.

    ragraph bench --engine sim --workflows oneshot,multistep,irg --quick
    ragraph bench --engine sim --scale 4000000 --nprobe 32,128          # the full run, with plots
    ragraph bench --engine llamacpp                 # HyDE, IRG, oneshot, multistep vs LangGraph
    ragraph bench --engine openai --url http://127.0.0.1:8080   # the same on a llama-server
    ragraph bench --ablation --engine sim --workflows irg --quick       # what each pass is worth
    ragraph bench --ablation --rates 2,4,8 --no-offline      # ... online, latency against rate
    ragraph bench --preset seeds [--quick]            # HedraRAG's retrieval-heavy regime
    ragraph bench --target http://127.0.0.1:8000 --rates 2,4 --requests 200   # a running server
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from ragraph import workflows
from ragraph.cli.options import (
    add_config_flag,
    add_gpu_flags,
    add_model_flags,
    add_thread_flags,
    numbers,
)
from ragraph.console import new_console

REPO = Path(__file__).resolve().parents[2]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench", help="latency/throughput of ragraph vs the sequential and stage-batched baselines",
        description="Run offline and online (Poisson) workloads on all three executors with the "
        "same engines and requests; print ratio tables, write CSV and latency-vs-rate plots.",
    )
    p.add_argument("--workflows",
                   help="comma-separated names in workflows/ or .rag paths (sim: oneshot,"
                   "multistep,irg; llamacpp, openai: hyde,irg,oneshot,multistep)")
    add_config_flag(p)
    p.add_argument("--engine", choices=("sim", "llamacpp", "openai"),
                   help="sim (simulated Llama-3.1-8B on an H100, timed from a measured profile; "
                   "default), the real llama.cpp engine, or an OpenAI-compatible server at "
                   "--url that ragraph and the LangGraph app's openai client both call")
    p.add_argument("--model", help="GGUF path for --engine llamacpp (default: embedded Gemma); "
                   "the request's model name for --engine openai")
    p.add_argument("--url", help="--engine openai: the server's base URL. A llama-server "
                   "started with --metrics --slot-save-path DIR --cache-ram 0 is emptied "
                   "between runs and reports its own work (docs/benchmarks/llama-server.md)")
    p.add_argument("--preset", choices=("seeds",),
                   help="seeds: HedraRAG's regime (the largest padded index memory allows, "
                   "IVF4096, nprobe 128/256/512, 128 questions at 4-28 req/s and 1,024 offline, "
                   "oneshot, HyDE, multistep, IRG, RECOMP); with --quick about 15 minutes")
    p.add_argument("--ablation", action="store_true",
                   help="what each pass is worth: -O0, each pass alone, -O2 without each pass "
                   "and -O2, the baselines of --executors beside them, on oneshot, HyDE, "
                   "multistep and IRG (--workflows): offline, and online at --rates (Poisson "
                   "arrivals; --no-offline for those alone) with latency per rate, the highest "
                   "rate within the SLO and speculation's accuracy")
    p.add_argument("--variants", metavar="LABELS",
                   help="--ablation: only these runs, by their labels, comma-separated; give it "
                   "with '=' as the labels start with '-': --variants=-O0,-O2,'-O2 -speculate'")
    p.add_argument("--quick", action="store_true",
                   help="small index and few requests (under 10 minutes on 2 cores)")
    p.add_argument("--scale", type=int, help="synthetic padding vectors (2,000,000; quick 400,000)")
    p.add_argument("--nlist", type=int, help="IVF lists (default ~1,000 vectors per list)")
    p.add_argument("--nprobe", help="comma-separated nprobe values (32,128; quick 128)")
    p.add_argument("--rates", help="comma-separated request rates (default: around the "
                   "offline throughputs)")
    p.add_argument("--rate-points", type=int, help="rates in the automatic sweep (5)")
    p.add_argument("--window", type=float, help="seconds of arrivals per online run (20)")
    p.add_argument("--requests", type=int, help="requests per offline run (64)")
    p.add_argument("--concurrency", "-c",
                   help="requests in flight, the same for every executor; comma-separated for "
                   "several, offline runs at each and online runs at the first (sim: 64; "
                   "llamacpp, openai: 8,16; --preset seeds: 64,128)")
    p.add_argument("--repeat", type=int, metavar="N",
                   help="run every cell N times in turn (1): the tables read each executor's "
                   "median run, and a table gives the median and range of req/s, share of the "
                   "bound and ratio over the N; the CSV has every run (column repeat)")
    p.add_argument("--no-offline", action="store_true", help="online runs only (needs --rates)")
    p.add_argument("--no-mix", action="store_true", help="skip the random mix of the workflows")
    p.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    p.add_argument("--build-only", action="store_true",
                   help="build (or find) the index the run would use, print its folder and stop "
                   "(a run builds a missing index in a process of its own anyway)")
    p.add_argument("--executors",
                   help="sim: ragraph,sequential,stage-batched; llamacpp, openai: "
                   "ragraph,langgraph")
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                   help="folder of the QA datasets and corpora (default ../shared/data)")
    p.add_argument("--out", type=Path, default=Path("bench-out"), help="CSV and plots go here")
    p.add_argument("--slo", type=float, default=10.0, help="per-request p95 latency SLO (10 s)")
    add_thread_flags(p)
    add_model_flags(p)
    p.add_argument("--passes", help="ragraph pass pipeline (-O2)")
    p.add_argument("--budget-ms", type=float, metavar="MS",
                   help="a fixed time budget per retrieval sub-stage: split-stages' searches "
                   "are always cut into steps of about MS (default: adaptive, a step is split "
                   "only where `policies.split_pays`); docs/benchmarks/ablation.md"
                   "#split-stages-under-one-by-one-arrivals-2026-11-29")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--traffic", default="uniform", metavar="uniform|zipf:ALPHA",
                   help="which questions each run asks: uniform (each question in turn; "
                   "default) or zipf:ALPHA (drawn from the whole question list, rank r with "
                   "probability proportional to 1/r^ALPHA, seeded; the same draw for every "
                   "executor of a cell)")
    p.add_argument("--target", metavar="URL",
                   help="drive a running `ragraph serve` at URL instead: Poisson arrivals at "
                   "--rates, else a closed loop of --concurrency clients; --requests in all "
                   "(default 64); --workflows default: every workflow it serves")
    p.add_argument("--stream", type=float, default=0.0, metavar="SHARE",
                   help="--target: the share of requests that stream their answer (0)")
    p.add_argument("--api-key", help="--target: the server's API key")
    add_gpu_flags(p)
    ray = p.add_argument_group("scale-out (--ray: throughput vs shards and replicas; needs the "
                               "extra: pip install \"ragraph[ray]\")")
    ray.add_argument("--ray", metavar="ADDRESS",
                     help="Ray cluster (HOST:PORT, auto, or local for one on this machine)")
    ray.add_argument("--index", type=Path, help="index directory on a path every node reads "
                     "(default: the embedded Wikipedia index)")
    ray.add_argument("--shard-counts", default="1,2,3", help="shard counts to run (1,2,3)")
    ray.add_argument("--replica-counts", default="1,2", help="engine replica counts (1,2)")
    ray.add_argument("--replicas", metavar="URLS", help="real OpenAI-compatible servers "
                     "(default: simulated H100 replicas)")
    ray.add_argument("--shard-cpus", type=float, default=1.0, help="Ray CPUs per shard (1)")
    p.set_defaults(func=run)


def _names(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(x.strip() for x in text.split(",") if x.strip())


# Online requests per run when --window is given: the window decides, not a preset's cap.
UNCAPPED = 1_000_000


def config_from(args: argparse.Namespace):
    from ragraph.bench.data.traffic import Traffic
    from ragraph.bench.measure.machine import available_memory_bytes
    from ragraph.bench.run.config import BenchConfig, bench_run
    from ragraph.bench.run.presets import ablation_preset, llamacpp_preset, quick, seeds_preset

    knobs, swept = bench_knobs(args)
    config = BenchConfig(
        workflow_dir=workflows.HERE, data=args.data if args.data.is_dir() else None,
        out=args.out, slo_s=args.slo, seed=args.seed,
        offline=not args.no_offline, mix=not args.no_mix, plots=not args.no_plots,
        # Given up front too: an online-only run is checked for its rates as it is built.
        rates=numbers(args.rates, "--rates", float),
        traffic=Traffic.parse(args.traffic), run=bench_run(**knobs),
    )
    if config.run.llm.engine in ("llamacpp", "openai"):
        config = llamacpp_preset(config)
    if args.quick:
        config = quick(config)
    if args.preset == "seeds":
        config = seeds_preset(config, available_memory_bytes())
    if args.ablation:
        config = ablation_preset(config)
    overrides = {
        **swept, "workflows": _names(args.workflows), "executors": _names(args.executors),
        "scale": args.scale, "nlist": args.nlist,
        "rates": numbers(args.rates, "--rates", float), "rate_points": args.rate_points,
        "window_s": args.window, "offline_requests": args.requests, "repeat": args.repeat,
        "variants_chosen": _names(args.variants),
        "plots": False if args.no_plots else None,  # a preset may turn plots on
        # A window asked for is a window run: a preset's cap on online requests (the seeds'
        # 128) would end it early at any rate past cap / window, and it said nothing.
        "max_online_requests": None if args.window is None else UNCAPPED,
    }
    return replace(config, **{k: v for k, v in overrides.items() if v is not None})


def bench_knobs(args: argparse.Namespace) -> tuple[dict[str, object], dict[str, object]]:
    """The run's knobs for `BenchConfig.run`: the --config file's with the flags given over them;
    and the swept values given (the flags' lists, else the file's one value), which override a
    preset's."""
    from ragraph.bench.run.config import RUN_KNOBS, file_knobs

    file = file_knobs(args.config) if args.config is not None else {}
    flags = {name: getattr(args, name) for name in RUN_KNOBS}
    knobs = {**{k: v for k, v in file.items() if k in RUN_KNOBS},
             **{k: v for k, v in flags.items() if v is not None}}
    swept = {"concurrencies": numbers(args.concurrency, "--concurrency", int),
             "nprobes": numbers(args.nprobe, "--nprobe", int)}
    for plural, name in (("concurrencies", "concurrency"), ("nprobes", "nprobe")):
        if swept[plural] is None and name in file:
            swept[plural] = (file[name],)
    return knobs, swept


def run_scale(args: argparse.Namespace) -> int:
    from ragraph.bench.run import scale

    urls = _names(args.replicas) or ()
    config = scale.ScaleBenchConfig(
        address=args.ray, index=args.index, data=args.data if args.data.is_dir() else None,
        shard_counts=numbers(args.shard_counts, "--shard-counts", int),
        replica_counts=numbers(args.replica_counts, "--replica-counts", int),
        replica_urls=urls, workflow=_workflow(args), requests=args.requests or 48,
        concurrency=int(args.concurrency or 16), nprobe=int(args.nprobe or 32),
        shard_cpus=args.shard_cpus)
    console = new_console(highlight=False)
    rows = scale.run(config, console)
    console.print(scale.table(rows, simulated=not urls))
    return 0 if all(r.same_answers for r in rows) else 1


def _workflow(args: argparse.Namespace) -> Path:
    name = (_names(args.workflows) or ("oneshot",))[0]
    return Path(name) if name.endswith(".rag") else workflows.HERE / f"{name}.rag"


def run(args: argparse.Namespace) -> int:
    from ragraph.bench.run.driver import bench_cache, build_apart, build_index, index_ready
    from ragraph.bench.run.driver import run as run_bench
    from ragraph.errors import ConfigError

    if args.repeat is not None and (args.ray is not None or args.target):
        raise ConfigError("--repeat", "repeats the bench's own cells; a --target or --ray run "
                          "is one pass (run it again to repeat it)")
    if args.build_only and (args.ray is not None or args.target):
        raise ConfigError("--build-only", "builds the bench's own index; a --target or --ray run "
                          "uses the index it is given")
    if args.ray is not None:
        return run_scale(args)
    console = new_console(highlight=False)
    if args.target:
        return run_target(args, console)
    config = config_from(args)
    if config.data is None:
        console.print(f"note: {args.data} not found: Wikipedia passages and built-in questions only")
    if args.build_only:
        info = build_index(config, console)
        console.print(f"index: {info.directory} ({info.real:,} real + {info.synthetic:,} "
                      f"synthetic vectors, IVF{info.nlist})")
        return 0
    if not index_ready(config, bench_cache()):
        console.print("the index is not built yet: building it in a process of its own, so the "
                      "cells are timed in one that built nothing")
        build_apart(config)
    report = asyncio.run(run_bench(config, console))
    console.print(f"bench finished in {report.seconds:.0f} s")
    return 0


def run_target(args: argparse.Namespace, console: Console) -> int:
    from ragraph.bench.run.http_load import LoadSpec
    from ragraph.bench.run.target import run_target as drive_target

    clients = numbers(args.concurrency, "--concurrency", int) or (8,)
    spec = LoadSpec(target=args.target.rstrip("/"), requests=args.requests or 64, rate=None,
                    clients=clients[0], stream_share=args.stream, api_key=args.api_key,
                    seed=args.seed)
    reports = drive_target(spec, _names(args.workflows), numbers(args.rates, "--rates", float),
                           args.data if args.data.is_dir() else None, console)
    return 0 if all(r.ok for r in reports) else 1
