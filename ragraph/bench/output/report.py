"""Rich tables of a bench run; every table is captioned with the engine and the machine."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from rich.console import Console
from rich.table import Table

from ragraph.bench.measure.bounds import LlmRates, Rates
from ragraph.bench.measure.machine import detect
from ragraph.bench.output import reasons as W
from ragraph.bench.output import results as R
from ragraph.bench.output.steps_table import STEPS_LEGEND, steps_table
from ragraph.bench.run.cells import CellResult


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


SHORT = {"sequential": "seq", "stage-batched": "stage", "langgraph": "langgraph"}


def _cell_key(r: CellResult) -> tuple[str, int, float, int]:
    return r.cell.workload, r.cell.nprobe, r.cell.rate or 0.0, r.cell.concurrency


def _load(r: CellResult) -> str:
    return "offline" if r.cell.rate is None else f"{r.cell.rate:.2f}/s"


def cells_table(rows: Sequence[CellResult], caption: str) -> Table:
    table = Table(title="Latency and throughput, side by side (ratios: ragraph vs baseline)",
                  caption=caption, show_lines=False)
    baselines = R.baselines_in(rows)
    ratios = [f"thr vs {SHORT[b]}" for b in baselines] + [f"p50 vs {SHORT[baselines[0]]}"
                                                           for _ in baselines[:1]]
    for col in ("workload", "nprobe", "load", "conc", "executor", "p50 s", "p95 s", "req/s",
                *ratios, "at bound", "retrieval", "spec hit", "CPU", "embedder",
                "LLM busy", "LLM tokens", "agree"):
        table.add_column(col, justify="left" if col in ("workload", "executor", "load") else "right")
    for _, group in groupby(rows, key=_cell_key):
        cell = list(group)
        for i, r in enumerate(cell):
            first = i == 0
            mine = r.executor == "ragraph"
            vs = [_x(R.throughput_ratio(cell, b)) if mine else "" for b in baselines]
            vs += [_x(R.latency_ratio(cell, b)) if mine else "" for b in baselines[:1]]
            table.add_row(
                r.cell.workload if first else "", str(r.cell.nprobe) if first else "",
                _load(r) if first else "", str(r.cell.concurrency) if first else "",
                r.executor, f"{r.summary.p50_s:.2f}", f"{r.summary.p95_s:.2f}",
                f"{r.summary.throughput_rps:.2f}",
                *vs, _pct(r.bound_share), _pct(r.retrieval_share),
                _pct(r.speculation_hit_rate) if mine else "",
                _pct(r.cpu_busy), _pct(r.embed_busy), _pct(r.engine_busy),
                f"{r.llm.llm_tokens:,}", _pct(r.agree),
                end_section=i == len(cell) - 1,
            )
    return table


TIME_SPLIT_LEGEND = (
    "time split: each pass's seconds by llama.cpp's own timers, and in brackets what the bound "
    "priced that work at (a decode pass's seconds include the prompt tokens riding in it, which "
    "the price counts as prompt work); the rest is what the price leaves out: prompt forwards "
    "(a prompt pass is one forward for each run of consecutive sequence ids with equal chunks, "
    "so prompts of different lengths are a forward each, each paying a forward's fixed cost, "
    "which the price at full passes does not), and KV copies (a pass after copies applies them "
    "first and reserves llama.cpp's worst-case graph again)")


def time_split_table(rows: Sequence[CellResult], caption: str) -> Table:
    """Where each executor's time went: the LLM engine's prompt and decode seconds (its own
    timers) beside what the bound priced them at, what llama.cpp spent beyond that price on
    (forwards, KV copies), how busy it was, the prompt tokens it reused, and the query
    embedder."""
    table = Table(title="Time split: the LLM engine's prompts (prefill) and decode steps, per run "
                  "(priced: at the bound's rates)", caption=caption)
    for col in ("workload", "load", "conc", "executor", "wall s", "prefill s (priced)",
                "decode s (priced)", "prompt forwards", "KV copies (passes)", "engine busy",
                "reused prompt tok", "LLM tokens", "decode batch", "embedder", "CPU"):
        table.add_column(col, justify="left" if col in ("workload", "executor", "load") else "right")
    for r in rows:
        # The app decodes one request at a time: its batch is 1 by construction.
        llm = r.llm
        batch = (f"{llm.completion_tokens / llm.decode_steps:.1f}" if llm.decode_steps
                 else "1" if r.executor == "langgraph" else "-")
        table.add_row(r.cell.workload, _load(r), str(r.cell.concurrency), r.executor,
                      f"{r.summary.wall_s:.1f}", _priced(llm.prefill_s, r, "prefill_s"),
                      _priced(llm.decode_s, r, "decode_s"),
                      f"{llm.prefill_forwards:,}" if llm.prefill_forwards else "-",
                      (f"{llm.kv_copies:,} ({llm.copy_passes:,})" if llm.kv_copies else "-"),
                      _pct(r.engine_busy), f"{llm.cached_tokens:,}", f"{llm.llm_tokens:,}", batch,
                      _pct(r.embed_busy),
                      _pct(r.cpu_busy))
    return table


def _priced(ran_s: float, r: CellResult, part: str) -> str:
    """Seconds a kind of pass took, and in brackets what the run's bound priced them at."""
    return f"{ran_s:.1f}" if r.bound is None else f"{ran_s:.1f} ({getattr(r.bound, part):.1f})"


def server_work_table(rows: Sequence[CellResult], caption: str) -> Table:
    """What the server computed for each run, by its own counters (llama-server /metrics): the
    same measure for ragraph, the LangGraph app and the server alone."""
    table = Table(title="The server's work, per run (its own counters)", caption=caption)
    for col in ("workload", "conc", "executor", "wall s", "req/s", "prompt tok computed",
                "reused", "generated", "llama_decode calls", "slots per call", "CPU here",
                "embedder"):
        table.add_column(col, justify="left" if col in ("workload", "executor") else "right")
    for r in rows:
        llm = r.llm
        table.add_row(r.cell.workload, str(r.cell.concurrency), r.executor,
                      f"{r.summary.wall_s:.1f}", f"{r.summary.throughput_rps:.2f}",
                      f"{llm.prompt_tokens:,}",
                      f"{llm.cached_tokens:,}", f"{llm.completion_tokens:,}",
                      f"{llm.decode_steps:,}",
                      "-" if r.server_batch is None else f"{r.server_batch:.1f}",
                      _pct(r.cpu_busy), _pct(r.embed_busy))
    return table


def slo_table(points: Sequence[R.SloPoint], slo_s: float, caption: str) -> Table:
    table = Table(title=f"Max throughput within the SLO (p95 latency <= {slo_s:g} s)",
                  caption=caption)
    for col in ("workload", "nprobe", "executor", "req/s", "from", "ragraph vs it"):
        table.add_column(col, justify="right" if col in ("req/s", "ragraph vs it") else "left")
    for p in sorted(points, key=lambda p: (p.workload, p.nprobe, p.executor != "ragraph")):
        vs = "" if p.executor == "ragraph" else _x(R.slo_ratio(points, p.workload, p.nprobe,
                                                                p.executor))
        table.add_row(p.workload, str(p.nprobe), p.executor,
                      "none met" if p.rps is None else f"{p.rps:.2f}", p.source, vs)
    return table


def engine_targets_table(targets: Sequence[R.Target], rows: Sequence[CellResult],
                         caption: str, engine: str = "llamacpp", repeats: bool = False) -> Table:
    issue, why = (("28", W.why_server_bound) if engine == "openai"
                  else ("31" if repeats else "14", W.why_engine_bound))
    table = Table(title=f"Targets (issue {issue}): ragraph vs the LangGraph app, offline",
                  caption=caption)
    for col in ("workload", "conc", "vs", "metric", "target", "measured", "verdict",
                "why (when missed)"):
        table.add_column(col, overflow="fold")
    for t in targets:
        cell = [r for r in rows if r.cell.rate is None and (r.cell.workload, r.cell.nprobe,
                r.cell.concurrency) == (t.workload, t.nprobe, t.concurrency)]
        table.add_row(t.workload, str(t.concurrency), t.baseline, t.metric, f">= {t.want:.1f}x",
                      _x(t.got), t.verdict(), why(t, cell))
    return table


def targets_table(targets: Sequence[R.Target], shares: dict[tuple[str, int], float],
                  busy: dict[tuple[str, int], W.Busy], caption: str) -> Table:
    table = Table(title="Targets (issue 7) and the retrieval share of sequential requests",
                  caption=caption)
    cores = detect().cores
    for col in ("workload", "nprobe", "vs", "target", "measured", "LLM engine ceiling",
                "verdict", "retrieval share (least loaded run)", "why (when missed)"):
        table.add_column(col, overflow="fold")
    for t in targets:
        share = shares.get((t.workload, t.nprobe))
        regime = "" if share is None else (" (in 20-60%)" if 0.2 <= share <= 0.6 else
                                           " (OUTSIDE 20-60%)")
        table.add_row(t.workload, str(t.nprobe), t.baseline, f">= {t.want:.1f}x", _x(t.got),
                      _x(t.ceiling), t.verdict(), _pct(share) + regime,
                      W.why_missed(t, share, busy.get((t.workload, t.nprobe), {}), cores))
    return table


def ablation_table(rows: Sequence[CellResult], caption: str) -> Table:
    """Each pass's contribution, per cell: alone over -O0, and -O2 with it over -O2 without it
    (a pass outside -O2 added to it)."""
    from ragraph.bench.run.ablation import contributions

    table = Table(title="What each pass is worth (offline; throughput and p95 ratios: higher "
                  "is better)", caption=caption)
    for col in ("workload", "conc", "pass", "alone vs -O0: thr", "p95",
                "-O2 with vs without: thr", "p95", "dropping it from -O2 also drops"):
        table.add_column(col, justify="left" if col in ("workload", "pass") else "right")
    for _, group in groupby(rows, key=_cell_key):
        cell = list(group)
        for i, c in enumerate(contributions(cell)):
            table.add_row(cell[0].cell.workload if i == 0 else "",
                          str(cell[0].cell.concurrency) if i == 0 else "", c.name,
                          _x(c.alone_thr), _x(c.alone_p95), _x(c.marginal_thr),
                          _x(c.marginal_p95), ", ".join(c.also_dropped))
    return table


def reuse_lines(rows: Sequence[CellResult]) -> list[str]:
    """What the llama.cpp prefix store is worth, per cell: ragraph with and without it, and the
    prompt tokens the LangGraph app's llama-cpp-python reused beside them."""
    from ragraph.bench.run.config import NO_REUSE

    out = []
    for _, group in groupby(rows, key=_cell_key):
        by = {r.executor: r for r in group}
        on, off, app = by.get("ragraph"), by.get(NO_REUSE), by.get("langgraph")
        if on is None or off is None or not off.summary.throughput_rps:
            continue
        gain = on.summary.throughput_rps / off.summary.throughput_rps - 1
        theirs = "" if app is None else f"; the LangGraph app {app.llm.cached_tokens:,}"
        out.append(f"prefix reuse, {on.cell.workload} at {on.cell.concurrency} in flight: "
                   f"{on.llm.cached_tokens:,} prompt tokens reused "
                   f"({off.llm.cached_tokens:,} without the store{theirs}), "
                   f"{on.summary.throughput_rps:.2f} vs {off.summary.throughput_rps:.2f} req/s "
                   f"({gain:+.0%})")
    return out


def popularity_note(rows: Sequence[CellResult], traffic: str) -> str:
    """Document popularity per cell under the run's traffic, beside RAGCache's measure. Every
    executor of a cell asks the same questions; ragraph's row (else the first) stands for it."""
    from ragraph.bench.data.traffic import RAGCACHE_TOP_SHARE, TOP_FRACTION

    cells = []
    for _, group in groupby(rows, key=_cell_key):
        cell = list(group)
        r = next((x for x in cell if x.executor == "ragraph"), cell[0])
        cells.append(f"{r.cell.workload} {_load(r)} {_pct(r.top_docs_share)}")
    return (f"document popularity (--traffic {traffic}): share of the passages retrieved (each "
            f"request's final top-k) that the top {TOP_FRACTION:.0%} of the documents retrieved "
            f"served: {'; '.join(cells) or 'no cells'} (RAGCache measured "
            f"{RAGCACHE_TOP_SHARE:.0%})")


def fanout_lines(rows: Sequence[CellResult]) -> list[str]:
    """How the branches of maps shared search steps, for each cell where ragraph ran maps."""
    out = []
    for r in rows:
        if r.executor != "ragraph" or not r.fan_steps:
            continue
        out.append(f"fan-out, {r.cell.workload} ({_load(r)}, {r.cell.concurrency} in flight): "
                   f"{r.branch_searches:,} branch retrievals advanced in {r.fan_steps:,} of "
                   f"{r.search_steps:,} search steps; in {r.shared_steps:,} of them two or more "
                   f"branches of one map searched side by side ({r.branch_searches / r.fan_steps:.1f}"
                   " branch steps per step); stage-batched searches each batch's branches in one "
                   "call, the thread pool one branch after another")
    return out


def bounds_table(rows: Sequence[CellResult], caption: str) -> Table:
    """Each run against the least time its own work could take on these engines
    (`bench.measure.bounds`), and that time's parts."""
    table = Table(title="Bounds: the least time each run's work could take on these engines "
                  "(at bound = bound / wall)", caption=caption)
    for col in ("workload", "load", "conc", "executor", "wall s", "bound s", "LLM s",
                "cores s", "embed core-s", "search core-s", "at bound"):
        table.add_column(col, justify="left" if col in ("workload", "executor", "load") else "right")
    for r in rows:
        if r.bound is None:
            continue
        b = r.bound
        table.add_row(r.cell.workload, _load(r), str(r.cell.concurrency), r.executor,
                      f"{r.summary.wall_s:.2f}", f"{b.total_s:.2f}", f"{b.llm_s:.2f}",
                      f"{b.cores_s:.2f}",
                      f"{b.embed_s:.2f}", f"{b.search_s:.2f}", _pct(r.bound_share))
    return table


def bound_legend(rows: Sequence[CellResult]) -> str:
    """How 'bound s' and 'at bound' were derived, with the rates this run measured."""
    probes = R.probes_of(rows)
    if not probes:
        return "bound: not measured in this run (the engines' rates were not probed)"
    priced, llm = probes[0], probes[0].llm
    combine = ("their sum (the LLM engine computes on the cores that embed and scan)"
               if priced.shares_cores else
               f"the larger of the LLM time and the cores' time (the larger of the queries at "
               f"the embedder's fastest and the core-seconds over the {priced.cores} cores)")
    return (f"bound: the least time each run's own measured work could take on these engines, "
            f"at their own rates measured alone {priced.probed}: the prompt tokens the LLM "
            f"engine computed at {llm.prefill_tok_s:,.0f} tokens/s + {llm.prefill_pos_s * 1e6:.3f}"
            f" us a position each attends to{_pass_floor(llm)}, its decode steps at "
            f"{llm.step_s * 1000:.2f} ms + "
            f"{llm.token_s * 1000:.3f} ms a sequence in the step + {llm.context_s * 1e6:.3f} us "
            f"a position each sequence attends to (probed at full passes, a short and a long "
            f"prompt, a batch of 1 and the run's, a position at the cheaper of the two; "
            f"{llm.timed_by}), "
            f"the queries embedded at {priced.embedding_price()}, the vectors scanned (ragraph's "
            f"count; a baseline's: its queries x the vectors a query scans) at "
            f"{priced.scan_vec_s / 1e6:.1f} M/s a core (each at its cheapest: one thread or "
            f"every core); then {combine}{_second_probe(rows, probes)}. at bound: that time over "
            "the run's wall time (100%: as fast as these engines allow the work it did; an online "
            "run's arrivals set its pace, so only offline runs can come near it)")


def _pass_floor(llm: LlmRates) -> str:
    if llm.pass_s <= 0:
        return ""
    return f", each prompt pass at no less than {llm.pass_s * 1000:.2f} ms (the weights read once)"


def _second_probe(rows: Sequence[CellResult], probes: Sequence[Rates]) -> str:
    """What the legend says of the rates probed again after the last cell."""
    if len(probes) < 2:
        return ""
    other = probes[1]
    used = sum(r.bound is not None and r.bound.rates.probed == other.probed for r in rows)
    return (f". Probed again {other.probed}: {other.llm.prefill_tok_s:,.0f} prompt tokens/s, "
            f"decode steps at {other.llm.step_s * 1000:.2f} ms + {other.llm.token_s * 1000:.3f} "
            f"ms a sequence, queries at {other.embedding_price()}, "
            f"{other.scan_vec_s / 1e6:.1f} M vectors/s a core; each run is priced at the probe "
            f"that gives its work the lesser time ({used} of {len(rows)} at this one)")


def print_all(console: Console, rows: Sequence[CellResult], slo_s: float, engine: str,
              caption: str, notes: Sequence[str], ablation: bool = False,
              repeats: bool = False, last: Sequence[Table] = ()) -> list[R.Target]:
    """Every table and note of a run; `repeats`: the traffic asked questions again (zipf);
    `last`: tables printed after the others, before the notes."""
    console.print(cells_table(rows, caption))
    if any(r.bound is not None for r in rows):
        console.print(bounds_table(rows, caption))
    if ablation:
        _ablation_tables(console, rows, slo_s, caption)
        found: list[R.Target] = []
    else:
        found = _executor_tables(console, rows, slo_s, engine, caption, repeats)
    for table in last:
        console.print(table)
    for note in [*notes, bound_legend(rows)]:
        console.print(f"note: {note}", highlight=False)
    return found


def _ablation_tables(console: Console, rows: Sequence[CellResult], slo_s: float,
                     caption: str) -> None:
    from ragraph.bench.output import online_ablation

    offline = [r for r in rows if r.cell.rate is None]
    if offline:
        console.print(ablation_table(offline, caption))
    if len(offline) < len(rows):
        console.print(online_ablation.latency_table(rows, slo_s, caption))
        console.print(online_ablation.slo_table(rows, slo_s, caption))


def _executor_tables(console: Console, rows: Sequence[CellResult], slo_s: float, engine: str,
                     caption: str, repeats: bool) -> list[R.Target]:
    """The executors side by side: fan-out, SLO points and targets, and the engine's work."""
    for line in fanout_lines(rows):
        console.print(line, highlight=False)
    points = R.slo_points(rows, slo_s)
    found = R.targets(points, engine, rows, repeats)
    if engine != "openai":
        console.print(steps_table(rows, caption))
        console.print(f"note: {STEPS_LEGEND}", highlight=False)
    if engine == "sim":
        console.print(slo_table(points, slo_s, caption))
        if found:
            console.print(targets_table(found, W.sequential_retrieval_share(rows),
                                        W.offline_busy(rows), caption))
    else:
        if engine == "openai":
            console.print(server_work_table(rows, caption))
        else:
            console.print(time_split_table(rows, caption))
            if any(r.llm.prefill_forwards or r.llm.kv_copies for r in rows):
                console.print(f"note: {TIME_SPLIT_LEGEND}", highlight=False)
        for line in reuse_lines(rows):
            console.print(line, highlight=False)
        if found:
            console.print(engine_targets_table(found, rows, caption, engine, repeats))
    return found
