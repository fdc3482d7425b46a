"""The least time a run's measured work could take on the engines that ran it (issue 31).

A run's work is what its engines counted: the prompt tokens the LLM engine computed (reused
ones excluded) and the positions they sat at, its decode steps, the sequences those steps
advanced and the positions those attended up to, the queries embedded and the vectors the search
engine scanned. The rates are the engines' own, measured alone in the same bench run before its
first cell (`bench.probe`), each at the threads the run gives it.

The LLM engine's time is linear in that work (the engine's own cost model, fitted to the probe):
- a prompt token costs `1 / prefill_tok_s`, plus `prefill_pos_s` for each earlier position it
  attends to (attention grows with the prompt: on llama.cpp a token of a 1,536-token prompt
  costs more than one of a 512-token prompt). The prefill rate is the engine's best: full passes,
  the better of one prompt and many.
- a decode step costs `step_s`, plus `token_s` for each sequence in it, plus `context_s` for
  each position each sequence attends to. Summed over the run's steps at whatever batches and
  contexts it ran, that is `step_s * steps + token_s * sequences + context_s * positions`,
  exactly under the model: only the totals are needed.
A forward pass that carries prompt chunks and decode tokens at once (an engine that mixes them,
as the simulated GPU does) is one pass: its decode tokens are priced at `token_s` each and the
pass's fixed cost once, inside the prefill rate; the engine counts it as no decode step.

Where the LLM engine computes on the cores that embed and scan (llama.cpp here, a server on this
machine), none of their work can hide behind another's: the bound is the sum. Where it has its
own device (the simulated GPU, a server elsewhere), the bound is the larger of the LLM's time and
the cores' time (embedding plus scanning).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LlmRates:
    prefill_tok_s: float  # prompt tokens a second at position 0 (the best batch probed)
    step_s: float  # a decode step's cost whatever its batch
    token_s: float  # plus this for each sequence in the step
    timed_by: str  # "engine timers" or "wall clock" (an HTTP server reports no times)
    prefill_pos_s: float = 0.0  # plus this for each position a prompt token attends to
    context_s: float = 0.0  # plus this for each position a decoded token attends to

    def seconds(self, work: Work) -> float:
        sequences = work.decode_tokens or work.completion_tokens
        steps = work.decode_steps or sequences  # not counted: one sequence a step
        return (work.prompt_tokens / self.prefill_tok_s
                + self.prefill_pos_s * work.prefill_context
                + self.step_s * steps + self.token_s * sequences
                + self.context_s * work.decode_context)


@dataclass(frozen=True)
class Rates:
    """The engines' own rates, measured alone in this bench run."""

    llm: LlmRates
    embed_s: float  # seconds a query embedded (the best batch probed)
    scan_vec_s: float  # vectors the search engine scans a second (probe and scan)
    # Vectors one query scans at each nprobe probed: the work of a retrieval whose executor
    # does not count its own scans (the baselines search through faiss directly).
    per_query: tuple[tuple[int, float], ...]
    shares_cores: bool  # the LLM engine computes on the cores that embed and scan

    def vectors_per_query(self, nprobe: int) -> float:
        found = dict(self.per_query)
        if nprobe in found:
            return found[nprobe]
        # An nprobe not probed: the nearest one probed, scaled (vectors grow with clusters).
        near = min(found, key=lambda n: abs(n - nprobe))
        return found[near] * nprobe / near


@dataclass(frozen=True)
class Work:
    """What a run's engines counted (`EngineCounters`; 0: not counted)."""

    prompt_tokens: int  # computed (prompt tokens served from reused KV excluded)
    completion_tokens: int
    decode_steps: int  # 0: not counted, one step a sequence (the LangGraph app decodes alone)
    queries: int  # embedded
    vectors: int  # scanned; 0: not counted (queries x the vectors a query scans)
    decode_tokens: int = 0  # sequences the decode steps advanced; 0: the completion tokens
    prefill_context: int = 0  # positions of the computed prompt tokens, summed
    decode_context: int = 0  # positions of the decoded tokens, summed


@dataclass(frozen=True)
class Bound:
    llm_s: float
    embed_s: float
    search_s: float
    total_s: float
    rates: Rates  # what the work was priced at

    def share(self, wall_s: float) -> float | None:
        """The bound's time over the run's: 1.0 is as fast as these engines allow."""
        return self.total_s / wall_s if wall_s > 0 else None


def least_time(work: Work, rates: Rates, nprobe: int) -> Bound:
    llm = rates.llm.seconds(work)
    embed = work.queries * rates.embed_s
    vectors = work.vectors or work.queries * rates.vectors_per_query(nprobe)
    search = vectors / rates.scan_vec_s if rates.scan_vec_s > 0 else 0.0
    cores = embed + search
    total = llm + cores if rates.shares_cores else max(llm, cores)
    return Bound(llm, embed, search, total, rates)


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
