"""`ragraph run FILE --question Q`: one answer, and with --verbose how it was reached."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from rich.console import Console
from rich.table import Table

from ragraph.cli.run_input import search_options
from ragraph.runtime.app import execute, open_services
from ragraph.runtime.catalog import Catalog
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.outcome import Outcome
from ragraph.runtime.request import Request, initial_variables
from ragraph.runtime.trace import Tracer

T = TypeVar("T")


def engine_label(config: RuntimeConfig) -> str:
    """The engine, and for the simulated one where its step times come from (a bad --profile
    file fails here, before any model loads)."""
    llm = config.llm
    if llm.simulated:
        from ragraph.runtime.llm.sim.engine import SimConfig

        return (f"sim (SIMULATED GPU engine, text synthetic; step times: "
                f"{SimConfig.of(llm).cost.label})")
    if llm.engine == "llamacpp":
        mode = "serial-exact, one generation at a time" if llm.exact else "batched"
        return f"llamacpp ({llm.model or 'Gemma-3-270M Q4_K_M, embedded'}, {mode}, real)"
    if llm.replicas:
        return f"{llm.engine} ({len(llm.replicas)} replicas, prefix-aware routing, real)"
    return f"{llm.engine} ({llm.url or llm.model}, real)"


def chat_note(catalog: Catalog, llm: object) -> str:
    """Which template renders the workflow's chat turns (once the engine has started: a GGUF's
    own is known only then); empty when it has none."""
    chats = any(getattr(node, "chat", False) for graph in catalog.graphs.values()
                for node in graph.nodes())
    source = getattr(llm, "chat_template", "")
    return f"chat turns: {source}" if chats and source else ""


async def open_run(config: RuntimeConfig, err: Console):
    """The search side; the first use builds the default index, with a progress bar."""
    from ragraph.runtime.app import open_search

    return with_index(config, err, open_search)


def with_index(config: RuntimeConfig, err: Console, opener: Callable[..., T]) -> T:
    """`opener(config, progress)`: the first use of the default index builds it, with a
    progress bar."""
    from ragraph.cli.cmd_index import progress_bar
    from ragraph.runtime.retrieval.build.corpus import default_index_dir

    if config.search.index is not None or (default_index_dir() / "manifest.json").is_file():
        return opener(config)
    with progress_bar(err, "building the default Wikipedia index (first use only)",
                      transient=True) as bar:
        return opener(config, bar)


async def run_question(catalog: Catalog, question: str, config: RuntimeConfig,
                       args: argparse.Namespace, console: Console, err: Console) -> int:
    scheduler = config.scheduler
    request = Request(id="q1", question=question, search=search_options(args))
    # A workflow whose inputs the question cannot fill fails here, before any model loads.
    initial_variables(catalog.workflows[catalog.default].source, request)
    err.print(f"[dim]workflow {catalog.default} · executor {scheduler.executor} {scheduler.passes} · "
              f"engine {engine_label(config)} · {config.describe_threads()}\n"
              f"{config.gpu.describe()}[/dim]")
    search = await open_run(config, err)
    tracer = Tracer()
    async with open_services(config, search, tracer) as services:
        note = chat_note(catalog, services.llm)
        if note:
            err.print(f"[dim]{note}[/dim]")
        result = await execute(catalog, [request], config, services)
    outcome = result.outcomes[0]
    if args.trace:
        tracer.write(args.trace)
        err.print(f"trace written to {args.trace} (open it in https://ui.perfetto.dev)")
    if outcome.error:
        err.print(f"[red]error:[/red] {outcome.error}", markup=True)
        return 1
    console.print(outcome.answer, markup=False)
    if args.verbose:
        _explain(outcome, tracer, console)
        console.print(f"speculation: {result.stats.describe_speculation()}")
    return 0


def _explain(outcome: Outcome, tracer: Tracer, console: Console) -> None:
    if outcome.passages is not None:
        console.print("\n[bold]passages[/bold] (last retrieval)")
        for i, p in enumerate(outcome.passages, start=1):
            console.print(f"  {i}. [{p.id}] {p.title}: {p.text[:160]}", markup=False)
            if p.origin is not None:
                o = p.origin
                console.print(f"     from {o.source}, characters {o.start}-{o.end}", markup=False)
    console.print("\n[bold]path[/bold]  " + " → ".join(("START",) + outcome.path))
    table = Table("start ms", "duration ms", "track", "what", title="timeline", box=None)
    spans = sorted(tracer.spans(), key=lambda s: s.start)
    origin = spans[0].start if spans else 0.0
    for s in spans:
        table.add_row(f"{(s.start - origin) * 1e3:.0f}", f"{(s.end - s.start) * 1e3:.0f}",
                      s.track, s.name)
    console.print(table)
    console.print(f"latency {outcome.latency * 1e3:.0f} ms")
