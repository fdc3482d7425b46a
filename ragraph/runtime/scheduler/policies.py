"""Scheduling decisions as pure functions of measured state (unit-tested without engines).

Numbers and equations come from HedraRAG (SOSP 2025) and RAGCache; see DESIGN.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class RunningMean:
    """Exponentially weighted running mean; `value` is None until the first sample."""

    alpha: float = 0.2
    value: float | None = None

    def add(self, sample: float) -> float:
        self.value = sample if self.value is None else (1 - self.alpha) * self.value + self.alpha * sample
        return self.value


def retrieval_budget_ms(beta_ms: float, mean_retrieval_ms: float, floor_ms: float = 0.5) -> float:
    """HedraRAG's sub-stage budget mb = sqrt(2·β·t_R).

    The expected latency gain of cutting a retrieval of length t_R into sub-stages of length mb is
    (t_R − mb)/2 − (t_R/mb)·β: half a sub-stage of waiting saved against β per extra sub-stage. Its
    maximum is at mb = sqrt(2·β·t_R). (The paper prints the overhead term with a plus sign; the minus
    is the meaning.) Never below `floor_ms`, never above t_R (one sub-stage is the whole search).
    """
    if beta_ms < 0 or mean_retrieval_ms < 0:
        raise ValueError("beta_ms and mean_retrieval_ms must be non-negative")
    if mean_retrieval_ms == 0:
        return floor_ms
    return min(max(math.sqrt(2.0 * beta_ms * mean_retrieval_ms), floor_ms), mean_retrieval_ms)


# Under load, the most of a search step's time that may go to its fixed overhead β.
LOADED_OVERHEAD_SHARE = 0.1


def loaded_budget_ms(budget_ms: float, beta_ms: float, backlog_ms: float) -> float:
    """The sub-stage budget while retrievals queue behind the search.

    sqrt(2·β·t_R) weighs one retrieval's wait against its own overhead; with a backlog, every
    step's β delays all the queued retrievals and is lost search capacity (a large share of the
    search thread: docs/benchmarks/code-figures.md#search-step-policies). So while the backlog
    exceeds one step, the budget grows until β is at most `LOADED_OVERHEAD_SHARE` of a step,
    never past the backlog.
    """
    if budget_ms < 0 or beta_ms < 0 or backlog_ms < 0:
        raise ValueError("budget, beta and backlog must be non-negative")
    share = LOADED_OVERHEAD_SHARE
    return max(budget_ms, min(beta_ms * (1 - share) / share, backlog_ms))


# A step of at most this many retrievals, none of them asking for a partial top-k, is searched
# whole (`step_budget_ms`). Measured with two search threads; a count, not a share of the
# threads, so that hosts with more threads change only where few retrievals share a step.
FEW_RETRIEVALS = 4


def step_budget_ms(beta_ms: float, mean_retrieval_ms: float | None, backlog_ms: float,
                   generation_follows: bool, ready: int | None = None,
                   partial_wanted: bool = True) -> float:
    """A search step's budget. Whole searches (infinite) while no retrieval waiting has a
    generation after it in its request: sub-stages pay for themselves by letting a generation
    start while other searches go on, and they cost the sharing of lists among queries that one
    big list-major step gets. Where generations follow, whole searches put requests in lockstep
    with them and cost throughput (both measured:
    docs/benchmarks/code-figures.md#search-step-policies), so: sqrt(2·β·t_R) grown under load,
    and whole searches until a retrieval has been timed.

    Also whole: a step of `ready` retrievals, at most `FEW_RETRIEVALS`, none asking for a
    partial top-k to speculate on (`partial_wanted`). There is no lockstep to break, and cut
    into sub-stages such a retrieval pays β again and waits between its steps for the
    embedding batches the search thread runs meanwhile: on the seeds index at nprobe
    256, IRG took 1.05x and 1.23x -O0's mean latency at 6 and 10 req/s with sub-stages, 0.96x
    and 0.98x without (docs/benchmarks/ablation.md#split-stages-where-few-retrievals-share-a-step-2026-11-29).
    A partial top-k still needs them: speculation starts a generation on one."""
    if backlog_ms > 0 and not generation_follows:
        return math.inf
    if mean_retrieval_ms is None:
        return math.inf
    if not partial_wanted and ready is not None and ready <= FEW_RETRIEVALS:
        return math.inf
    return loaded_budget_ms(retrieval_budget_ms(beta_ms, mean_retrieval_ms), beta_ms, backlog_ms)


def split_pays(finishing: int, waiting: int, rest_ms: float, lost_ms: float,
               speculating: float = 0.0) -> bool:
    """Whether a budgeted sub-stage beats one step that takes every ready retrieval whole.

    HedraRAG prices a sub-stage by its fixed overhead β alone. On CPU IVF-Flat scans a split also
    forgoes sharing: one whole step reads each list once for every query probing it, two steps
    read the shared lists twice. The split ends `finishing` retrievals earlier, each by the
    `rest_ms` of scanning the others still need; it delays every retrieval of the step and every
    query queued behind it (`waiting` in all) by `lost_ms`: the later steps' cost plus β minus
    the whole step's. Summed latency is lower with the split exactly when
    finishing x rest_ms > waiting x lost_ms. On the seeds' regime, steps decided by this rule
    carry more retrievals, and the generations they release together prefill in one engine step
    (measured: docs/benchmarks/code-figures.md#search-step-policies).

    `speculating`: the retrievals of the step that stop short of their end with a partial top-k
    that may start their next generation on an idle LLM engine (HedraRAG's speculative
    generation), weighted by the share of speculations adopted: each adopted one starts its
    generation `rest_ms` earlier, as if its retrieval had finished."""
    if finishing < 0 or waiting < 0 or speculating < 0:
        raise ValueError("finishing, waiting and speculating must be non-negative")
    return (finishing + speculating) * rest_ms > waiting * max(lost_ms, 0.0)


def embed_batch_size(per_query_ms: float | None, mean_retrieval_ms: float | None,
                     least: int, most: int) -> int:
    """Queries in the next embedding batch: `least`, or as many as embed within one
    retrieval's mean search time, up to `most`; `least` until both have been measured."""
    if per_query_ms is None or mean_retrieval_ms is None:
        return least
    fits = mean_retrieval_ms / max(per_query_ms, 1e-6)
    return int(min(max(fits, least), most))


def list_major_batch(min_sharing: float | None, nlist: int, nprobe: int) -> int:
    """Queries a step needs before its lists are shared enough to be read once for all of them
    (`listmajor.MIN_SHARING`): n x nprobe (query, list) pairs over at most nlist lists. 0 where
    steps are never list-major (`min_sharing` None, or infinite: list-major never paid on this
    machine)."""
    if min_sharing is None or not math.isfinite(min_sharing) or nprobe <= 0:
        return 0
    return math.ceil(min_sharing * nlist / nprobe)


def join_before_step(per_query_ms: float | None, waiting: int, step_ms: float) -> bool:
    """Whether the queries still waiting should be embedded before the step that the batch just
    embedded would start, so that they join it: when embedding them costs at most that step's
    predicted scan time. Joining delays the step by that embedding; not joining
    leaves them a step of their own later, and a list-major step reads each list once for all
    its queries, so theirs would cost about as much as this one (on 2 cores, nprobe 256: 64
    queries scanned 49.5M vectors/s in one step, 16 queries 16-20M). With int8 MiniLM on 2 cores
    (3-4 ms a query) the 48 queries waiting behind a first batch of 16 join its step; at a
    quarter of the step they never did, and multistep and IRG served 5-23% fewer requests
    (figures: docs/benchmarks/code-figures.md#search-step-policies)."""
    if per_query_ms is None or waiting <= 0 or step_ms <= 0:
        return False
    return waiting * per_query_ms <= step_ms


# Queries in the embedding batch that feeds an LLM engine holding no generation (`feed_batch`).
FEED_BATCH = 4


def feed_batch(holding: int, timed: bool, last: int, drain_ms: float | None = None,
               per_query_ms: float | None = None, search_ms: float | None = None) -> int | None:
    """The most queries the next embedding batch may take where the LLM engine would otherwise
    wait on it, for retrievals whose results start generations; None: no cap.
    `holding`: the generations the engine holds or that wait for room in it; `timed`: whether
    one has finished (so a generation's time is known); `last`: the previous batch's queries.
    An engine holding nothing gets `FEED_BATCH` queries' prompts as soon as they are embedded
    and searched (on 2 cores at nprobe 256, 4 queries in about 80 ms where 16 and the 48 that
    joined their step took 350-430 before the first prompt); until a generation has been
    timed the batches double, so the engine has work while the next, larger one is searched.
    Past that, an engine that batches on its own (`drain_ms`: the most its held generations
    can still take, None elsewhere) gets batches it has the work to wait out: as many queries
    as embed (`per_query_ms`) and search (`search_ms`) before it drains, at least
    `FEED_BATCH`. A batch larger than that left a simulated GPU idle, then prefilling it in
    one pass and decoding alone (HyDE: 0.36 s idle, then 40 prompts in two passes).
    Elsewhere the usual batches: capping them by the engine's drain there staggered the
    generations and cost more decode steps than the idle time it saved (both measured:
    docs/benchmarks/code-figures.md#search-step-policies)."""
    if holding == 0:
        return FEED_BATCH
    if not timed:
        return max(FEED_BATCH, 2 * last)
    if drain_ms is None or not per_query_ms:
        return None
    fits = (drain_ms - (search_ms or 0.0)) / per_query_ms
    return max(FEED_BATCH, int(fits))


def leaves_to_release(critical: bool, free_tokens: float | None, prefilling: float,
                      sizes: Sequence[float]) -> int:
    """How many of the prompts `sizes` (estimated tokens, in the order they would go) that lead
    to no further search go to an engine that batches on its own now.
    While a generation whose request searches next is in the engine (`critical`), such
    prompts go in no faster than its decode steps absorb prompt work at no cost:
    `free_tokens`, the prompt tokens a step computes in the time a decode step takes anyway
    (None where the engine's steps are not observable: no pacing), less `prefilling`, the
    tokens of those already sent and not yet prefilled; one at least when none is. A serving
    engine admits every waiting prompt up to its token budget (8,192 on vLLM), so prompts
    released together make one long pass that every decoding sequence waits out; the
    generations on the critical path then finish later and hold their searches back (HyDE on the
    simulated GPU: its hypothetical passages decoded for 800 ms instead of 480). Without a
    critical generation nothing waits: whole batches keep the engine busy."""
    if not critical or free_tokens is None:
        return len(sizes)
    n, load = 0, prefilling
    for size in sizes:
        if load > 0 and load + size > free_tokens:
            break
        load += size
        n += 1
    return n


# The engine's busy share from which it is the bound, and the search thread's under which it
# has time for a batch a retrieval.
ENGINE_BOUND_SHARE = 0.8
STREAM_SEARCH_SHARE = 0.5


def stream_prompts(release: str, engine_share: float | None, search_share: float | None) -> bool:
    """Whether a retrieval's prompt goes to the LLM engine as soon as the retrieval finishes
    (embedded and searched on its own) rather than with its search step's.
    An engine that batches on its own (a simulated or real GPU server) runs decode tokens in
    its prompt passes: prompts that reach it one by one keep its passes mixed, where a step's
    prompts together prefill in one pass and leave decode-only steps behind. Worth it where
    that engine is the bound (`engine_share`: its busy share, None where it computes on this
    machine's cores or has not been measured), and affordable only while the search thread,
    which then embeds and searches a query at a time, has time to spare; elsewhere steps stay
    whole. `release` "step" or "retrieval" forces one (`SchedulerConfig.release`)."""
    if release != "auto":
        return release == "retrieval"
    return (engine_share is not None and engine_share >= ENGINE_BOUND_SHARE
            and (search_share is None or search_share < STREAM_SEARCH_SHARE))


@dataclass
class BusyMeter:
    """The share of recent wall time an engine spent computing, from its own timers (seconds
    busy, as `EngineCounters.busy_s`), over windows of at least `window_s`. None until an
    engine has reported any: engines without timers (HTTP, simulated) are judged by load."""

    window_s: float = 0.5
    share: float | None = None
    _busy: float = 0.0
    _at: float | None = None

    def sample(self, busy_s: float, now: float) -> float | None:
        if self._at is None:
            self._busy, self._at = busy_s, now
        elif now - self._at >= self.window_s:
            if busy_s > 0:
                self.share = min((busy_s - self._busy) / (now - self._at), 1.0)
            self._busy, self._at = busy_s, now
        return self.share


def has_spare_capacity(load: float, capacity: float, tau: float) -> bool:
    """The next sub-stage is under-utilized: T_curr/T_max < τ."""
    return capacity > 0 and load / capacity < tau


def speculation_load(running: int, on_their_way: int, busy_share: float | None) -> int:
    """The generation stage's load that speculation's τ rule weighs: the generations running,
    and, until the engine's busy share has been measured, those that the other retrievals in
    flight (`on_their_way`, the speculating one among them) are about to start. That is a
    run's first wave, every request retrieving and none generating: the stage reads empty
    while it is about to be full, and speculating cut the first searches into sub-stages
    (the seeds quick oneshot cell at 64 in flight, quiet: 10% fewer requests served). Once
    the share is measured it says whether the engine is fed: a busy engine is the bottleneck
    (`engine_is_bottleneck`), and one starved by a loaded search side has room; counting the
    retrievals on their way there too cost that cell 10% beside two busy loops
    (docs/benchmarks/seeds.md#speculation-costs-the-oneshot-cell-behind-the-thread-pool-2026-11-29)."""
    if busy_share is not None:
        return running
    return running + max(on_their_way - 1, 0)


def engine_is_bottleneck(busy_share: float | None, tau: float) -> bool:
    """An engine that computes on this machine's cores and was busy at least τ of the recent
    time is the bottleneck: speculative generations and warm-up searches would take time from
    the real work on the same cores (llama.cpp with a few requests in flight keeps them busy)."""
    return busy_share is not None and busy_share >= tau


@dataclass(frozen=True)
class PrefillCandidate:
    rid: str
    cached_tokens: int
    prompt_tokens: int
    waited_cycles: int
    arrival: int  # admission order, for stable FIFO among equals
    group: str | None = None  # prompts with the same leading documents (prefix-layout)
    critical: bool = False  # its request has another search after it (`leads_to_search`)


def order_prefills(ready: Sequence[PrefillCandidate], starvation_window: int = 32) -> list[str]:
    """RAGCache's cache-aware order: highest cached/computed ratio first, except that a request
    that waited `starvation_window` cycles or more goes first (oldest first); requests whose
    prompts share their leading documents then go back to back, where the first of them
    stands, so the second reuses the KV the first computes."""
    order = _by_ratio(ready, starvation_window)
    group_of = {c.rid: c.group for c in ready}
    out: list[str] = []
    placed: set[str] = set()
    for rid in order:
        if rid in placed:
            continue
        group = group_of[rid]
        same = [r for r in order if r not in placed and group is not None and group_of[r] == group]
        for r in same or [rid]:
            out.append(r)
            placed.add(r)
    return out


def order_for_engine(ready: Sequence[PrefillCandidate]) -> list[str]:
    """The order prompts reach an engine that batches on its own (it takes them first come
    first served under its token budget): the workflow's critical path first (a prompt whose
    request searches again after it: the search side waits on its output), then the
    shortest prefill left (most prompts done soonest, Sarathi-Serve's and SRPT's rule), then
    arrival."""
    def key(c: PrefillCandidate) -> tuple[bool, int, int]:
        return (not c.critical, max(c.prompt_tokens - c.cached_tokens, 0), c.arrival)

    return [c.rid for c in sorted(ready, key=key)]


def _by_ratio(ready: Sequence[PrefillCandidate], starvation_window: int) -> list[str]:
    starving = sorted((c for c in ready if c.waited_cycles >= starvation_window),
                      key=lambda c: c.arrival)
    rest = [c for c in ready if c.waited_cycles < starvation_window]

    def ratio(c: PrefillCandidate) -> float:
        computed = max(c.prompt_tokens - c.cached_tokens, 1)
        return c.cached_tokens / computed

    rest.sort(key=lambda c: (-ratio(c), c.arrival))
    return [c.rid for c in starving + rest]


def prefetch_budget_bytes(link_bytes_per_s: float, expected_generation_s: float) -> int:
    """TeleRAG: what can cross the host-accelerator link while the generation runs."""
    return max(int(link_bytes_per_s * max(expected_generation_s, 0.0)), 0)
