"""What a finished request reports, and the summary of a run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragraph.errors import FailureKind
from ragraph.ir.values import Passages
from ragraph.runtime.request import RequestState


@dataclass(frozen=True)
class Outcome:
    rid: str
    question: str
    answer: str | None
    error: str | None
    path: tuple[str, ...]
    passages: Passages | None
    golden_answers: tuple[str, ...]
    admitted_at: float
    finished_at: float
    first_token_at: float | None = None
    workflow: str = ""
    error_kind: FailureKind | None = None  # with `error`: whose fault (ragraph.errors)
    started_at: float | None = None  # taken to run (after waiting for a slot)

    @property
    def latency(self) -> float:
        return self.finished_at - self.admitted_at

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.rid, "question": self.question, "workflow": self.workflow}
        if self.error is not None:
            out["error"] = self.error
            out["error_kind"] = self.error_kind or "internal"
        else:
            out["answer"] = self.answer
        if self.golden_answers:
            out["golden_answers"] = list(self.golden_answers)
        if self.passages is not None:
            out["passages"] = [p.to_json() for p in self.passages]
        out["path"] = list(self.path)
        out["latency_s"] = round(self.latency, 4)
        return out


def outcome_of(state: RequestState, workflow: str, now: float) -> Outcome:
    return Outcome(
        rid=state.rid,
        question=state.request.question,
        answer=None if state.error else (state.answer or ""),
        error=state.error,
        path=tuple(state.path),
        passages=state.retrievals[-1] if state.retrievals else None,
        golden_answers=state.request.golden_answers,
        admitted_at=state.admitted_at,
        finished_at=state.finished_at if state.finished_at is not None else now,
        first_token_at=state.first_token_at,
        workflow=workflow,
        error_kind=(state.error_kind or "internal") if state.error else None,
        started_at=state.started_at,
    )


@dataclass
class RunStats:
    """What an executor counted over a run, reported beside its outcomes: speculation, search
    work, the accelerator tier's share of it, map branches sharing search steps. The wavefront
    scheduler counts into one in place while it runs and hands it over when the run has
    drained; the other executors report an empty one."""

    speculations: int = 0  # speculative generations started
    speculation_hits: int = 0  # ... adopted at their commit point
    rollbacks: int = 0  # ... discarded (a changed partial top-k, or a different prompt)
    rollback_tokens: int = 0  # tokens the discarded ones had decoded: what rollbacks cost
    # Retrievals that asked for no partial top-k and speculated on none while the recent
    # speculations were mostly rolled back (`scheduler.backoff`).
    speculations_held_back: int = 0
    warm_searches: int = 0  # speculative retrievals (searches on a partial generation)
    clusters_searched: int = 0
    search_steps: int = 0
    vectors_scanned: int = 0
    vectors_on_accelerator: int = 0
    prefetch_errors: int = 0
    last_prefetch_error: str = ""
    fan_steps: int = 0  # search steps that carried branches of a map
    shared_steps: int = 0  # ... two or more branches of one map at once
    branch_searches: int = 0  # branch retrievals those steps advanced
    units: int = 0  # units the requests ran
    # The scheduler's estimates when the run drained: the overhead of one more sub-stage (β)
    # and the mean retrieval time (t_R), in ms; 0 where never measured.
    beta_ms: float = 0.0
    t_r_ms: float = 0.0

    @property
    def speculation_hit_rate(self) -> float | None:
        return self.speculation_hits / self.speculations if self.speculations else None

    def describe_speculation(self) -> str:
        """The line run summaries print: `started S, adopted A, rolled back R`, and `held
        back H` where the backoff held any retrieval back."""
        line = (f"started {self.speculations}, adopted {self.speculation_hits}, "
                f"rolled back {self.rollbacks}")
        if self.rollback_tokens:
            line += f" ({self.rollback_tokens} tokens discarded)"
        if self.speculations_held_back:
            line += f", held back {self.speculations_held_back}"
        if self.warm_searches:
            line += f"; {self.warm_searches} speculative searches"
        return line

    @property
    def cache_hit_rate(self) -> float | None:
        if not self.vectors_scanned:
            return None
        return self.vectors_on_accelerator / self.vectors_scanned


@dataclass(frozen=True)
class Summary:
    requests: int
    errors: int
    wall_s: float
    throughput_rps: float
    p50_s: float
    p95_s: float
    p99_s: float
    mean_s: float
    ttft_p50_s: float | None


def percentile(values: Sequence[float] | np.ndarray, q: float,
               empty: float | None = None) -> float | None:
    """The q-th percentile as every report of ragraph gives it (numpy's linear interpolation
    between the two nearest values), so the bench, the server and `serve --adapt` agree;
    `empty` for no values."""
    return float(np.percentile(values, q)) if len(values) else empty


def summarize(outcomes: Sequence[Outcome], wall_s: float) -> Summary:
    lat = np.array([o.latency for o in outcomes]) if outcomes else np.zeros(1)
    ttft = [o.first_token_at - o.admitted_at for o in outcomes if o.first_token_at is not None]
    return Summary(
        requests=len(outcomes),
        errors=sum(o.error is not None for o in outcomes),
        wall_s=wall_s,
        throughput_rps=len(outcomes) / wall_s if wall_s > 0 else 0.0,
        p50_s=percentile(lat, 50, 0.0),
        p95_s=percentile(lat, 95, 0.0),
        p99_s=percentile(lat, 99, 0.0),
        mean_s=float(lat.mean()),
        ttft_p50_s=float(np.median(ttft)) if ttft else None,
    )
