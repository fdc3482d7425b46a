"""The least time a run's measured work could take on the engines that ran it (issue 31).

A run's work is what its engines counted: the prompt tokens the LLM engine computed (reused
ones excluded), its decode steps and the tokens they produced, the queries embedded and the
vectors the search engine scanned. The rates are the engines' own, measured alone in the same
bench run before its first cell (`bench.probe`): the LLM engine's prefill tokens a second and the
time of a decode step as a function of its batch, the embedder's seconds a query and the search
engine's vectors scanned a second, each at the threads the run gives it.

A decode step of b sequences is modelled as `step_s + token_s * b` (a line through the probed
batches), so a run's decode steps at whatever batches it ran cost `step_s * steps + token_s *
tokens` exactly under that model: the batch of each step need not be known, only the totals.

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
    prefill_tok_s: float  # prompt tokens computed a second (the best batch probed)
    step_s: float  # a decode step's cost whatever its batch
    token_s: float  # plus this for each sequence in the step
    timed_by: str  # "engine timers" or "wall clock" (an HTTP server reports no times)

    def seconds(self, prompt_tokens: int, decode_steps: int, completion_tokens: int) -> float:
        return (prompt_tokens / self.prefill_tok_s + self.step_s * decode_steps
                + self.token_s * completion_tokens)


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
    """What a run's engines counted."""

    prompt_tokens: int  # computed (prompt tokens served from reused KV excluded)
    completion_tokens: int
    decode_steps: int  # 0: not counted, one step a token (the LangGraph app decodes alone)
    queries: int  # embedded
    vectors: int  # scanned; 0: not counted (queries x the vectors a query scans)


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
    steps = work.decode_steps or work.completion_tokens
    llm = rates.llm.seconds(work.prompt_tokens, steps, work.completion_tokens)
    embed = work.queries * rates.embed_s
    vectors = work.vectors or work.queries * rates.vectors_per_query(nprobe)
    search = vectors / rates.scan_vec_s if rates.scan_vec_s > 0 else 0.0
    cores = embed + search
    total = llm + cores if rates.shares_cores else max(llm, cores)
    return Bound(llm, embed, search, total, rates)


def fit_decode(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(step_s, token_s) of the line through (batch, seconds a step) points, least squares,
    neither below zero. One batch alone (or noise that slopes down): a flat line."""
    if not points:
        raise ValueError("fit_decode: no decode steps were timed")
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    spread = sum((b - mean_b) ** 2 for b, _ in points)
    slope = (sum((b - mean_b) * (t - mean_t) for b, t in points) / spread) if spread else 0.0
    if slope <= 0:
        return mean_t, 0.0
    step = mean_t - slope * mean_b
    if step < 0:  # through the origin instead
        return 0.0, sum(b * t for b, t in points) / sum(b * b for b, _ in points)
    return step, slope
