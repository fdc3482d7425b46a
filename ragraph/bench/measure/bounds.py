"""The least time a run's measured work could take on the engines that ran it (issue 31).

A run's work is what its engines counted: the prompt tokens the LLM engine computed (reused
ones excluded) and the positions they sat at, its decode steps, the sequences those steps
advanced and the positions those attended up to, the queries embedded and the vectors the search
engine scanned. The rates are the engines' own, measured alone in the same bench run before its
first cell and again after its last (`bench.measure.probe`); a run is priced at whichever probe
gives its work the lesser time (`bench.run.work.with_least_bound`). A query's embedding costs a
fixed part and a part a token it holds (the tokens are counted at the embedder); a vector
scanned costs the least a vector cost in the probe's steps (faiss's rows, or a list-major step
of as many queries as the run keeps in flight).

The LLM engine's time is linear in that work (the engine's own cost model, fitted to the probe):
- a prompt token costs `1 / prefill_tok_s`, plus `prefill_pos_s` for each earlier position it
  attends to (attention grows with the prompt: on llama.cpp a token of a 1,536-token prompt
  costs more than one of a 512-token prompt). The prefill rate is the engine's best: full passes,
  the better of one prompt and many.
- a decode step costs `step_s`, plus `token_s` for each sequence in it, plus `context_s` for
  each position each sequence attends to. Summed over the run's steps at whatever batches and
  contexts it ran, that is `step_s * steps + token_s * sequences + context_s * positions`,
  exactly under the model: only the totals are needed.
  The position cost is the cheaper of one sequence's and the run's batch's
  (`bench.measure.probe`): on a GPU a batch reads its KV cache far cheaper a position than one
  sequence does.
Every pass reads the weights once whatever it computes, so a prompt pass costs at least a
decode step's fixed cost `step_s` (`pass_s`: no more than the probe's smallest prompt pass
took): the engines count their prompt passes by size, and each is priced at no less than that
(`_passes_floor`). Priced at their tokens alone, the thread pool's stream of 100-200-token
passes on the simulated GPU read 62% of a bound it kept the engine busy through, ragraph's
multistep 85%.
A forward pass that carries prompt chunks and decode tokens at once (an engine that mixes them,
as the simulated GPU does) is a prompt pass, priced at its prompt tokens: the engine counts its
decode tokens in no decode step, neither as sequences nor as positions (they cost the pass no
more than their share of its prompt work; priced as decode steps' they put a thread pool's
streamed requests at 116-120% of their bound: docs/benchmarks/gpu.md).

Embedding and scanning are priced in core-seconds, each at the cheapest thread count probed (one
thread, or every core: a part's core-seconds do not fall with its threads unless it scales
better than linearly), because the executors give them different threads and overlap them
differently: ragraph and stage-batched embed a batch on every search thread and then scan on
them, taking turns, while the thread pool embeds on one thread beside scans on the others. A
rate probed "at the threads the run gives it" is therefore no bound: priced at the embedder's
one thread and the scans' two, ragraph's oneshot at nprobe 256 read more than 100% (it embedded
on two threads; docs/benchmarks/seeds.md#bounds-per-cell). Whatever the layout, the cores deliver at most `cores`
core-seconds a second, and the embedder takes one batch at a time (`SearchService`), at best at
its fastest thread count: the cores' least time is the larger of the queries at the embedder's
fastest and the two parts' core-seconds over the cores. No run at the probed costs is faster, and
where the core-seconds decide it a run reaches it: one thread embedding while the scans fill the
other cores.

Where the LLM engine computes on the cores that embed and scan (llama.cpp here, a server on this
machine), it holds every core through each pass, and no work of theirs can hide behind it: the
bound is the LLM's time plus the cores' core-seconds. Where it has its own device (the simulated
GPU, a server elsewhere), the bound is the larger of the LLM's time and the cores' time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragraph.bench.measure.llm_work import LlmWork

BEFORE = "before the first cell"
AFTER = "after the last cell"


@dataclass(frozen=True)
class LlmRates:
    prefill_tok_s: float  # prompt tokens a second at position 0 (the best batch probed)
    step_s: float  # a decode step's cost whatever its batch
    token_s: float  # plus this for each sequence in the step
    timed_by: str  # "engine timers" or "wall clock" (an HTTP server reports no times)
    prefill_pos_s: float = 0.0  # plus this for each position a prompt token attends to
    context_s: float = 0.0  # plus this for each position a decoded token attends to
    # A prompt pass's least seconds whatever its size: the weights read once, the cheaper of a
    # decode step's fixed cost and the probe's smallest prompt pass (0: not measured).
    pass_s: float = 0.0

    def prefill_seconds(self, work: LlmWork) -> float:
        tokens = work.prompt_tokens / self.prefill_tok_s + self.prefill_pos_s * work.prefill_context
        return max(tokens, self._passes_floor(work))

    def _passes_floor(self, work: LlmWork) -> float:
        """The prompt passes, each at no less than `pass_s`, plus the prompt tokens computed
        outside them (in llama.cpp's decode passes) at the prefill rate. The passes come in
        buckets of sizes within a factor of two: a bucket costs at least the larger of its
        tokens' price and its passes' fixed costs (a sum of maxima is at least the maximum of
        the sums), which is exact for a bucket of passes all under the point where a pass's
        tokens cost more than its weights read."""
        buckets = zip(work.prompt_passes, work.prompt_pass_tokens, strict=True)
        floor = sum(max(t / self.prefill_tok_s, n * self.pass_s) for n, t in buckets)
        outside = max(work.prompt_tokens - sum(work.prompt_pass_tokens), 0)
        return floor + outside / self.prefill_tok_s

    def decode_seconds(self, work: LlmWork) -> float:
        sequences = work.decode_tokens or work.completion_tokens
        steps = work.decode_steps or sequences  # not counted: one sequence a step
        return self.step_s * steps + self.token_s * sequences + self.context_s * work.decode_context


@dataclass(frozen=True)
class Rates:
    """The engines' own rates, measured alone in this bench run."""

    llm: LlmRates
    embed_s: float  # seconds a query embedded at the embedder's fastest (its best batch probed)
    scan_vec_s: float  # vectors a core scans a second (probe and scan; the cheapest step probed)
    # Vectors one query scans at each nprobe probed: the work of a retrieval whose executor
    # does not count its own scans (the baselines search through faiss directly).
    per_query: tuple[tuple[int, float], ...]
    shares_cores: bool  # the LLM engine computes on the cores that embed and scan
    cores: int = 1  # the cores embedding and scanning share
    # A query's embedding is a fixed part (`embed_s`) and a part a token (`embed_tok_s`) at the
    # embedder's fastest, and the same in core-seconds at its cheapest (None: as the fastest,
    # on one core). A run whose tokens were not counted is priced at the probe's questions'.
    embed_core_s: float | None = None
    embed_tok_s: float = 0.0
    embed_tok_core_s: float = 0.0
    probe_tokens: float = 0.0  # tokens a probe question held
    # When these were measured: a bench run probes before its first cell and again after its
    # last, and prices each run at whichever gives its work the lesser time (`bench.run.work`).
    probed: str = BEFORE

    def embedding(self, queries: int, tokens: int) -> tuple[float, float]:
        """(seconds at the embedder's fastest, core-seconds at its cheapest) of embedding
        `queries` that hold `tokens` (0: not counted)."""
        held = tokens or queries * self.probe_tokens
        fastest = queries * self.embed_s + held * self.embed_tok_s
        if self.embed_core_s is None:
            return fastest, fastest
        return fastest, queries * self.embed_core_s + held * self.embed_tok_core_s

    def embedding_price(self) -> str:
        """A query's embedding cost as a legend says it: core-ms a query and a token at the
        cheapest, ms at the fastest."""
        one_core = self.embed_core_s is None
        query = self.embed_s if one_core else self.embed_core_s
        token = self.embed_tok_s if one_core else self.embed_tok_core_s
        return (f"{query * 1000:.2f} core-ms each + {token * 1000:.3f} a token (the embedder's "
                f"fastest: {self.embed_s * 1000:.2f} ms + {self.embed_tok_s * 1000:.3f}; a run "
                f"whose tokens were not counted: {self.probe_tokens:.0f} tokens a query)")

    def vectors_per_query(self, nprobe: int) -> float:
        found = dict(self.per_query)
        if nprobe in found:
            return found[nprobe]
        # An nprobe not probed: the nearest one probed, scaled (vectors grow with clusters).
        near = min(found, key=lambda n: abs(n - nprobe))
        return found[near] * nprobe / near


@dataclass(frozen=True)
class Work:
    """What a run's engines counted (0: not counted)."""

    llm: LlmWork
    queries: int  # embedded
    vectors: int  # scanned; 0: not counted (queries x the vectors a query scans)
    query_tokens: int = 0  # the queries' tokens; 0: not counted


@dataclass(frozen=True)
class Bound:
    # The LLM engine's least time in its two parts, the prompt tokens' and the decode steps',
    # each set beside the seconds the engine's passes took (`LlmWork.prefill_s`, `decode_s`).
    prefill_s: float
    decode_s: float
    embed_s: float  # core-seconds
    search_s: float  # core-seconds
    total_s: float
    rates: Rates  # what the work was priced at
    cores_s: float = 0.0  # the cores' least time for the embedding and the scans

    @property
    def llm_s(self) -> float:
        return self.prefill_s + self.decode_s

    def share(self, wall_s: float) -> float | None:
        """The bound's time over the run's: 1.0 is as fast as these engines allow."""
        return self.total_s / wall_s if wall_s > 0 else None


def least_time(work: Work, rates: Rates, nprobe: int) -> Bound:
    prefill, decode = rates.llm.prefill_seconds(work.llm), rates.llm.decode_seconds(work.llm)
    llm = prefill + decode
    fastest, embed = rates.embedding(work.queries, work.query_tokens)
    vectors = work.vectors or work.queries * rates.vectors_per_query(nprobe)
    search = vectors / rates.scan_vec_s if rates.scan_vec_s > 0 else 0.0
    if rates.shares_cores:
        cores = embed + search
        total = llm + cores
    else:
        cores = max(fastest, (embed + search) / rates.cores)
        total = max(llm, cores)
    return Bound(prefill, decode, embed, search, total, rates, cores)


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the line through (x, y) points, least squares, neither below
    zero. One x alone (or noise that slopes down): a flat line. Decode: x a step's batch, y its
    seconds; prefill: x a token's mean position, y its seconds."""
    if not points:
        raise ValueError("fit_line: no points were measured")
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    slope = (sum((x - mean_x) * (y - mean_y) for x, y in points) / spread) if spread else 0.0
    if slope <= 0:
        return mean_y, 0.0
    intercept = mean_y - slope * mean_x
    if intercept < 0:  # through the origin instead
        return 0.0, sum(x * y for x, y in points) / sum(x * x for x, _ in points)
    return intercept, slope
