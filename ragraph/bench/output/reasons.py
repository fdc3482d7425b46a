"""Why a target was missed, from what each executor's runs measured: the retrieval share of
sequential requests, how busy the cores, the query embedder and the LLM engine were, where the
engine's time went, and the most this LLM engine serves whatever schedules it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragraph.bench.output.results import Target, by_executor
from ragraph.bench.run.cells import CellResult
from ragraph.bench.server.alone import LABEL as SERVER_ALONE


@dataclass(frozen=True)
class Busy:
    cpu: float  # share of all cores' time
    embed: float  # share of the wall time the query embedder ran
    llm_tokens: int = 0  # tokens the LLM engine computed
    llm: float = 0.0  # share of the wall time the LLM engine computed (simulated seconds for sim)
    throughput: float = 0.0  # req/s of that run
    prefill: float = 0.0  # share of the wall time the LLM engine spent in prefill

    @property
    def llm_ms_per_request(self) -> float | None:
        """The LLM engine's time a request cost: what batching saves, which the engine's busy
        share does not show."""
        return self.llm / self.throughput * 1000 if self.throughput > 0 and self.llm else None


def offline_busy(results: Sequence[CellResult]) -> dict[tuple[str, int], dict[str, Busy]]:
    """Per workload and nprobe, each executor's CPU, embedder and LLM use in the offline run."""
    out: dict[tuple[str, int], dict[str, Busy]] = {}
    for r in results:
        if r.cell.rate is None:
            out.setdefault((r.cell.workload, r.cell.nprobe), {})[r.executor] = Busy(
                r.cpu_busy, r.embed_busy, r.llm.llm_tokens, r.engine_busy or 0.0,
                r.summary.throughput_rps,
                r.llm.prefill_s / r.summary.wall_s if r.summary.wall_s > 0 else 0.0)
    return out


def sequential_retrieval_share(results: Sequence[CellResult]) -> dict[tuple[str, int], float]:
    """Per workload and nprobe: the retrieval share of sequential requests in the least loaded
    run (the lowest request rate; offline only without online runs). Under load a request's
    retrieval is mostly waiting for the embedder (79-95% offline at concurrency 64), which says
    how saturated the baseline is, not how costly retrieval is at this index scale."""
    out: dict[tuple[str, int], float] = {}
    for r in sorted(results, key=lambda r: (r.cell.rate is None, r.cell.rate or 0.0)):
        key = (r.cell.workload, r.cell.nprobe)
        if r.executor == "sequential" and r.retrieval_share is not None and key not in out:
            out[key] = r.retrieval_share
    return out


def why_missed(target: Target, share: float | None, busy: dict[str, Busy], cores: int) -> str:
    """A measured reason for a missed target (empty when met), from the retrieval share of
    sequential requests, how busy the cores and the query embedder were in each executor's
    offline run, and what its LLM engine computed (`busy` by executor)."""
    if target.met:
        return ""
    if not target.settled:
        return ("the rates offered did not find this knee: an executor whose p95 stays within the "
                "SLO at the highest rate serves at least that rate, whatever more it could; the "
                "offline runs' ratios (first table) compare them at full load")
    ours, theirs = busy.get("ragraph"), busy.get(target.baseline)
    beyond = _out_of_reach(target, busy)
    if beyond:
        return beyond
    if ours is not None and ours.llm >= 0.8:
        return _llm_bound(ours, theirs, target.baseline)
    if share is not None and share < 0.2:
        work = ""
        if ours is not None and theirs is not None and ours.llm_tokens and theirs.llm_tokens:
            work = (f"; the LLM engine computed {ours.llm_tokens:,} tokens for ragraph and "
                    f"{theirs.llm_tokens:,} for {target.baseline} (offline)")
        return (f"retrieval is only {share * 100:.0f}% of a sequential request: generation "
                f"dominates, so overlapping retrieval with it can save at most that share{work}")
    if ours is not None and ours.cpu >= 0.75:
        held = ""
        if theirs is not None and theirs.embed >= 0.7:
            held = (f"{target.baseline} ran out of query embedder first (busy "
                    f"{theirs.embed * 100:.0f}%: one query per call, on one core); ")
        return (f"CPU-bound: {held}ragraph embeds in batches and scans on all {cores} cores, "
                f"which were {ours.cpu * 100:.0f}% busy. Embedding and exact IVF scans are CPU "
                "work for every executor and the (simulated) GPU has room to spare, so the lead "
                "is the ratio of CPU cost per retrieval, not what overlapping retrieval with "
                "generation could give")
    if theirs is not None and theirs.embed >= 0.7:
        return (f"embedder-bound: {target.baseline}'s query embedder ran "
                f"{theirs.embed * 100:.0f}% of the time offline, but ragraph was not CPU-bound "
                f"(cores {0 if ours is None else ours.cpu * 100:.0f}% busy): look at a trace "
                "(ragraph run --trace) of this workload")
    seen = "" if ours is None else (f" (ragraph: cores {ours.cpu * 100:.0f}%, embedder "
                                    f"{ours.embed * 100:.0f}% busy offline)")
    return (f"not explained by the retrieval share, the CPU or the embedder{seen}: look at a "
            "trace (ragraph run --trace) of this workload")


def _out_of_reach(target: Target, busy: dict[str, Busy]) -> str:
    """The target asks more of the LLM engine than it can give: at the least engine time a
    request took in this cell, it serves fewer requests a second than the target needs.
    Empty where the target is within reach or the engine reported no times."""
    costs = {name: b.llm_ms_per_request for name, b in busy.items()
             if b.llm_ms_per_request is not None}
    if target.reachable or not costs:
        return ""
    best = min(costs, key=costs.__getitem__)
    ours = costs.get("ragraph")
    mine = "" if ours is None else f"; ragraph's cost {ours:.1f} ms a request"
    return (f"out of reach on this LLM engine: a request took at least {costs[best]:.1f} ms of "
            f"its time ({best}'s batches{mine}), so no executor serves more than "
            f"{1000 / costs[best]:.1f} req/s, {target.ceiling:.2f}x {target.baseline}'s "
            f"throughput. Prefill is compute-bound: what would move the ceiling is a faster LLM "
            f"tier (more GPUs, a smaller model) or a baseline slowed by heavier retrieval (a "
            f"larger index or nprobe)")


def _llm_bound(ours: Busy, theirs: Busy | None, baseline: str) -> str:
    """The engine had work most of ragraph's run. Only its prefill share is a ceiling: prefill is
    compute-bound, while a decode step of 64 sequences costs little more than one of 8 (the
    measured thread pool kept the engine as busy at 12 req/s as ragraph at 20)."""
    seen = "" if theirs is None else f", {theirs.llm * 100:.0f}% under {baseline}"
    said = (f"LLM engine busy: the (simulated) GPU computed {ours.llm * 100:.0f}% of ragraph's "
            f"offline run{seen}")
    mine = ours.llm_ms_per_request
    other = None if theirs is None else theirs.llm_ms_per_request
    if mine is not None and other is not None:
        said += f", {mine:.1f} vs {other:.1f} ms of it a request"
    if ours.prefill > 0:
        said += (f"; prefill, {ours.prefill * 100:.0f}% of the run, grows with prompt tokens "
                 f"rather than batching and caps this run at {1 / ours.prefill:.2f}x its "
                 "throughput")
    return (f"{said}; decode steps take larger batches at little cost a step, so the lead "
            "grows with more requests in them at once: less of a request's time in retrieval "
            "and embedding, or more requests in flight")


def why_engine_bound(target: Target, cell: Sequence[CellResult]) -> str:
    """Why a llama.cpp target was missed, from where each executor's engine time went."""
    rows = by_executor(cell)
    ours, theirs = rows.get("ragraph"), rows.get(target.baseline)
    if target.met or ours is None or theirs is None:
        return ""
    if target.metric == "p95":
        return (f"ragraph p95 {ours.summary.p95_s:.1f} s vs {theirs.summary.p95_s:.1f} s: "
                "requests wait behind a batch's prefills instead of a lock")
    mine, app = ours.llm, theirs.llm
    if not mine.prefill_s:
        return "the engine reported no timings: look at a trace (ragraph run --trace)"
    return (f"prefill-bound: the app's engine spent {app.prefill_s:.0f} s on prompts and "
            f"{app.decode_s:.0f} s decoding; ragraph's {mine.prefill_s:.0f} s and "
            f"{mine.decode_s:.0f} s ({mine.cached_tokens:,} prompt tokens reused, the app "
            f"{app.cached_tokens:,}). More needs fewer prompt tokens to compute (shared "
            "document prefixes) or faster prefill kernels" + _at_bound(ours, theirs))


def _at_bound(r: CellResult, baseline: CellResult) -> str:
    """ragraph's share of the least time its own work could take (`bench.measure.bounds`), and the
    ratio to `baseline` that running at that bound would give."""
    share = r.bound_share
    if share is None or r.bound is None:
        return ""
    said = (f". ragraph ran at {share * 100:.0f}% of its bound ({r.bound.total_s:.0f} s: its own "
            "work at the engines' own rates, measured alone)") + _beyond_price(r)
    if baseline.summary.throughput_rps and r.bound.total_s > 0:
        reach = r.summary.requests / r.bound.total_s / baseline.summary.throughput_rps
        said += f"; at its bound it would reach {_fmt(reach)} {baseline.executor}"
    return said


def _beyond_price(r: CellResult) -> str:
    """Where the engine's passes ran over their price, with what the price leaves out (the
    forwards and KV copies llama.cpp counted; empty where it counted none)."""
    llm, b = r.llm, r.bound
    if b is None or not (llm.prefill_forwards or llm.kv_copies):
        return ""
    return (f"; its prompt passes took {llm.prefill_s:.1f} s against {b.prefill_s:.1f} s priced, "
            f"in {llm.prefill_forwards:,} forwards, and its decode passes {llm.decode_s:.1f} s "
            f"against {b.decode_s:.1f} s, {llm.copy_passes:,} of them applying KV copies first "
            "(the time split)")


def why_server_bound(target: Target, cell: Sequence[CellResult]) -> str:
    """Why a target on a server was missed, from the server alone on the app's calls (its
    ceiling) and the work the server counted for each run."""
    rows = by_executor(cell)
    ours, theirs, alone = rows.get("ragraph"), rows.get(target.baseline), rows.get(SERVER_ALONE)
    if target.met or ours is None or theirs is None:
        return ""
    if target.metric == "p95":
        return (f"ragraph p95 {ours.summary.p95_s:.1f} s vs {theirs.summary.p95_s:.1f} s: its "
                "requests wait in the server's queue behind other requests' prompts")
    said = ""
    most = alone.summary.throughput_rps if alone is not None else 0.0
    if most > 0:
        said = (f"the server alone, replaying the app's generation calls with nothing between "
                f"them, served {most:.2f} req/s: the app had "
                f"{theirs.summary.throughput_rps / most * 100:.0f}% of that and ragraph "
                f"{ours.summary.throughput_rps / most * 100:.0f}%, so a client that "
                f"gives this server the app's work gains at most {_fmt(target.ceiling)}; more "
                "needs less work for the server. ")
    mine, app = ours.llm, theirs.llm
    if mine.llm_tokens or app.llm_tokens:
        said += (f"The server computed {mine.prompt_tokens:,} prompt tokens for ragraph "
                 f"({mine.cached_tokens:,} reused from its slots) and {app.prompt_tokens:,} "
                 f"for the app ({app.cached_tokens:,} reused); slots busy per llama_decode "
                 f"call {_batch(ours)} vs {_batch(theirs)}. ")
    return said + ("What would move it: fewer prompt tokens to compute per request (prompts "
                   "that share their documents' KV across requests), or a server with compute "
                   "to spare, where retrieval is a larger share of a request")


def _batch(r: CellResult) -> str:
    return "-" if r.server_batch is None else f"{r.server_batch:.1f}"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"
