"""`ragraph serve WORKFLOW...`: the workflows over HTTP, every client's requests in one scheduler.

    ragraph serve workflows/*.rag                              # http://127.0.0.1:8000
    ragraph serve workflows/hyde.rag --engine sim --port 9000 --api-key "$KEY"
    ragraph serve workflows/*.rag --ray HEAD:6379 --shards 4 --serve-replicas 2  # on Ray Serve
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ragraph.cli.options import add_runtime_flags, runtime_config
from ragraph.console import new_console
from ragraph.errors import ConfigError, RagraphError

if TYPE_CHECKING:
    from ragraph.runtime.catalog import Catalog
    from ragraph.runtime.config import RuntimeConfig
    from ragraph.serve import ServeSettings

KEY_ENV = "RAGRAPH_API_KEY"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve", help="serve workflows over HTTP (OpenAI-compatible, run API, metrics, a page)",
        description="Load and compile every workflow once, open the engines once, and answer "
        "HTTP requests through one scheduler, so concurrent clients batch together. Endpoints: "
        "/v1/chat/completions, /v1/completions, /v1/models (model = workflow name), "
        "/runs/stream, /runs/wait, /workflows/{name}, /ok, /health, /readiness, /metrics, and a "
        "page at /. Engine, index and pass options are those of `ragraph run`. With --ray ADDRESS "
        "the index's lists go to shard actors and the server to Ray Serve replicas "
        "(--serve-replicas), behind Serve's proxies on --host/--port.",
    )
    p.add_argument("files", type=Path, nargs="+", help="workflow files (.rag)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (127.0.0.1: this machine only; 0.0.0.0 exposes it)")
    p.add_argument("--port", type=int, default=8000, help="port (8000)")
    p.add_argument("--api-key", default=os.environ.get(KEY_ENV),
                   help=f"require 'Authorization: Bearer KEY' (default: ${KEY_ENV} if set)")
    p.add_argument("--allowed-hosts", type=_hosts, default=None, metavar="HOST,...",
                   help="Host header values answered, others get 400 ('*.example.com' "
                   "patterns; '*' any). Default on a loopback address: localhost, 127.0.0.1, "
                   "::1 and --host, so no web page can reach the server under a name of its "
                   "own (DNS rebinding); beyond this machine: any")
    p.add_argument("--max-connections", type=int, default=512,
                   help="open connections served; past them, 503 at once (512)")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds a connection has to send a request's headers before it is "
                   "closed (408 once it began one; slow or stalled clients) (10)")
    p.add_argument("--keep-alive", type=float, default=75.0,
                   help="seconds an idle connection is kept open after a response, longer "
                   "than clients' pools keep theirs idle (httpx 5 s, aiohttp 15 s) so none "
                   "reuses one the server is closing (75)")
    p.add_argument("--body-timeout", type=float, default=30.0,
                   help="seconds to send a request's body, then 408 and the connection is "
                   "closed (30)")
    p.add_argument("--max-body-bytes", type=int, default=1 << 20,
                   help="larger request bodies get 413 (1 MiB)")
    p.add_argument("--max-queue", type=int, default=256,
                   help="requests waiting beyond --concurrency before 429 (256)")
    p.add_argument("--request-timeout", type=float, default=300.0,
                   help="seconds before a request is cancelled with 504 (300)")
    p.add_argument("--drain-timeout", type=float, default=60.0,
                   help="seconds in-flight requests get to finish on shutdown; the rest then "
                   "get 503 (or a stream's 'error' event) saying the server is shutting down "
                   "(60)")
    p.add_argument("--adapt", type=Path, metavar="FRONT_OR_TUNED_FILE",
                   help="adaptation under load for the first workflow: while the latency a new "
                   "request should expect (the recent p95 plus its wait in the queue) is past "
                   "--adapt-slo, new requests go to the next cheaper point of "
                   "the front `ragraph tune` measured (its results file, or the .toml its --out "
                   "wrote), and back when the load falls; each switch logged and counted in "
                   "/metrics")
    p.add_argument("--adapt-slo", metavar="p95=SECONDS",
                   help="the latency target --adapt keeps (p95=2s); required with --adapt")
    ray = add_runtime_flags(p)
    ray.add_argument("--serve-replicas", type=int, default=1, metavar="N",
                     help="Ray Serve replicas of the server, each its own scheduler and engines "
                     "over the same shards (1)")
    ray.add_argument("--serve-cpus", type=float, default=1.0, metavar="CPUS",
                     help="Ray CPUs each Serve replica holds (1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from ragraph.serve import ServeSettings, build_app, run_server
    except ImportError as err:
        raise RagraphError(f"error: ragraph serve needs the serve extra ({err.name} is "
                           "missing): pip install 'ragraph[serve]'") from err
    from ragraph.api.load import compile_catalog
    from ragraph.cli.run_single import open_run

    settings = ServeSettings(host=args.host, port=args.port, api_key=args.api_key,
                             allowed_hosts=args.allowed_hosts,
                             max_connections=args.max_connections,
                             header_timeout_s=args.header_timeout,
                             body_timeout_s=args.body_timeout,
                             keep_alive_s=args.keep_alive,
                             max_body_bytes=args.max_body_bytes, max_queue=args.max_queue,
                             request_timeout_s=args.request_timeout,
                             drain_timeout_s=args.drain_timeout,
                             serve_replicas=args.serve_replicas, serve_cpus=args.serve_cpus)
    config = runtime_config(args)
    if config.scale.ray is None and (settings.serve_replicas != 1 or settings.serve_cpus != 1.0):
        raise ConfigError("--serve-replicas", "--serve-replicas and --serve-cpus need --ray "
                          "ADDRESS")
    graphs = load_workflows(args.files)
    adapt = adapt_plan(args, graphs, config.scheduler.concurrency)
    # Compiled once, here: a bad file or pass spec fails before any model loads.
    catalog = compile_catalog(graphs, config.scheduler.passes)
    err = new_console(stderr=True, highlight=False, soft_wrap=True)
    if config.scale.ray is not None:
        if adapt is not None:
            raise ConfigError("--adapt", "not with --ray (each replica would adapt alone)")
        from ragraph.cli.serve_ray import serve_on_ray

        return serve_on_ray(catalog, config, settings, err)
    search = asyncio.run(open_run(config, err))
    err.print(describe(catalog, config, settings))
    if adapt is not None:
        err.print(f"adapting {adapt.base} under load: points {', '.join(adapt.levels)} (best "
                  f"quality first), p95 target {adapt.switching.slo_s:g}s", markup=False)
    announce(settings, err)
    run_server(build_app(catalog, config, settings, search, adapt), settings)
    return 0


def adapt_plan(args: argparse.Namespace, graphs: dict, concurrency: int):  # noqa: ANN201
    """`--adapt`: the front's points as workflows `NAME@0` (the best quality), `NAME@1`, ...
    added to `graphs`, and the switching rule; None without --adapt."""
    if args.adapt is None:
        if args.adapt_slo is not None:
            raise ConfigError("--adapt-slo", "only with --adapt FRONT_OR_TUNED_FILE")
        return None
    if args.adapt_slo is None:
        raise ConfigError("--adapt", "needs --adapt-slo p95=SECONDS, the target it keeps")
    from ragraph.cli.cmd_tune import parse_slo
    from ragraph.serve.adapt import AdaptPlan, Switching
    from ragraph.tune.levels import front_levels, level_graph

    base = next(iter(graphs))
    names = []
    for i, point in enumerate(front_levels(args.adapt, base)):
        graph = level_graph(graphs[base], point)
        graph.name = f"{base}@{i}"
        graphs[graph.name] = graph
        names.append(graph.name)
    return AdaptPlan(base, tuple(names), Switching(parse_slo(args.adapt_slo), concurrency))


def describe(catalog: Catalog, config: RuntimeConfig, settings: ServeSettings) -> str:
    from ragraph.cli.run_single import engine_label

    scheduler = config.scheduler
    return (f"[dim]workflows {', '.join(catalog.workflows)} · executor {scheduler.executor} "
            f"{scheduler.passes} · engine {engine_label(config)} · concurrency "
            f"{scheduler.concurrency}, queue {settings.max_queue} · {config.describe_threads()}"
            f"\n{config.gpu.describe()}[/dim]")


def announce(settings: ServeSettings, err: Console, how: str = "") -> None:
    where = f"http://{settings.host}:{settings.port}"
    hosts = "any Host" if "*" in settings.hosts else "Host " + ", ".join(settings.hosts)
    err.print(f"serving on {where}{how} (page: {where}/) · API key "
              f"{'required' if settings.api_key else 'off'} · {hosts}")
    if not settings.loopback and not settings.api_key:
        err.print("[yellow]warning:[/yellow] bound beyond this machine without --api-key: "
                  "anyone who can reach the port can use the engines")


def _hosts(text: str) -> tuple[str, ...]:
    """`--allowed-hosts a,b`: the names, blanks dropped (ServeSettings checks each)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def load_workflows(files: list[Path]) -> dict:
    """Each file's workflow by its name; two files may not define the same name."""
    from ragraph.dsl import load

    graphs: dict = {}
    for path in files:
        graph = load(path)
        if graph.name in graphs:
            raise ConfigError("files", f"{path} defines workflow {graph.name!r} again")
        graphs[graph.name] = graph
    return graphs
