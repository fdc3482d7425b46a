"""How the simulated GPU forms each step: the scheduling policy of a real serving engine, so a
client of the simulator gets the batches it would get from that server.

`vllm` (the default) is vLLM V1's `Scheduler.schedule()`: one token budget per iteration
(`max_num_batched_tokens`, 8,192 for the API server on H100-class GPUs); the running requests
first, in the order they were admitted, each taking what it still needs (a decoding request its
one token, a request part-way through its prompt the next chunk of it); then the waiting ones,
first come first served, while the budget and `max_num_seqs` allow, the last one admitted
chunked to what is left of the budget (chunked prefill is on in V1). Decode never waits behind a
prompt (Sarathi-Serve's stall-free batching): it rides in the prompt pass. Each chunk's full KV
blocks enter the prefix cache as the step is planned (vLLM's `allocate_slots` caches them at
allocation, "so that the block can be reused by other requests in the same batch": its prefix
caching design), so a prompt admitted later in the same step reuses what an earlier one shares
with it (`took`).

`sglang` is SGLang's `get_next_batch_to_run`: a prefill batch whenever a prompt can be admitted
(the request part-way through its prompt first, then the waiting ones, chunked at
`chunked_prefill_size`, 8,192 on H100/H200), else one decode step of every running request. By
default (`--enable-mixed-chunk` off) the two alternate and the running requests wait for the
prefill batch; with `mixed_chunk` they ride in it and take their tokens out of its budget.
Its radix cache takes a prompt's KV after the batch that computed it, so prompts of one prefill
batch share nothing among themselves.

Pure functions of the queues, so the policies are tested without the engine's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from ragraph.errors import ConfigError

POLICIES = ("vllm", "sglang")

S = TypeVar("S")


@dataclass(frozen=True)
class Batching:
    """A serving engine's step policy and its limits."""

    policy: str = "vllm"
    # Tokens one step computes at most: vLLM's max_num_batched_tokens, SGLang's
    # chunked_prefill_size (both 8,192 on H100-class GPUs for an API server).
    token_budget: int = 8192
    # Requests running at once: vLLM's max_num_seqs, SGLang's max_running_requests.
    max_running: int = 256
    # SGLang's --enable-mixed-chunk (off by default there); vLLM always mixes.
    mixed_chunk: bool = False

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError("policy", f"must be one of {', '.join(POLICIES)}, got "
                              f"{self.policy!r}")
        for name in ("token_budget", "max_running"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be >= 1, got {getattr(self, name)}")
        if self.mixed_chunk and self.policy != "sglang":
            raise ConfigError("mixed_chunk", "is SGLang's option; vLLM always mixes")


@dataclass(frozen=True)
class StepPlan(Generic[S]):
    """One step: prompt tokens to compute for each sequence that has some left (a chunk, or
    the whole rest), the decoding sequences it advances by a token, and how many of the
    waiting sequences (a prefix of them) it admits."""

    chunks: tuple[tuple[S, int], ...] = ()
    decodes: tuple[S, ...] = ()
    admitted: int = 0

    @property
    def prompt_tokens(self) -> int:
        return sum(take for _, take in self.chunks)


Took = Callable[[S, int], None]


def _nothing(seq: object, take: int) -> None:
    return None


def plan_step(batching: Batching, running: Sequence[S], waiting: Sequence[S],
              left: Callable[[S], int], took: Took = _nothing) -> StepPlan[S]:
    """The next step under `batching`. `running`: the admitted sequences, in admission order;
    `waiting`: those that may be admitted now, in arrival order; `left(s)`: prompt tokens `s`
    still has to compute (0: it is decoding; looked up as late as the engine would, so a
    waiting sequence's prefix-cache hit is read when it is reached); `took(s, n)`: told, under
    vLLM's policy, each chunk as it is planned, before the next sequence is looked up."""
    if batching.policy == "sglang":
        return _sglang(batching, running, waiting, left)
    return _vllm(batching, running, waiting, left, took)


def _vllm(b: Batching, running: Sequence[S], waiting: Sequence[S],
          left: Callable[[S], int], took: Took) -> StepPlan[S]:
    budget = b.token_budget
    chunks: list[tuple[S, int]] = []
    decodes: list[S] = []
    for seq in running:
        if budget <= 0:
            break
        need = left(seq)
        if need == 0:
            decodes.append(seq)
            budget -= 1
        else:
            take = min(need, budget)
            chunks.append((seq, take))
            took(seq, take)
            budget -= take
    admitted, budget = _admit(waiting, len(running), b.max_running, budget, left, chunks, took)
    return StepPlan(tuple(chunks), tuple(decodes), admitted)


def _sglang(b: Batching, running: Sequence[S], waiting: Sequence[S],
            left: Callable[[S], int]) -> StepPlan[S]:
    decoding = [s for s in running if left(s) == 0]
    budget = b.token_budget - (len(decoding) if b.mixed_chunk else 0)
    chunks: list[tuple[S, int]] = []
    for seq in running:  # the request part-way through its prompt goes on first
        need = left(seq)
        if need and budget > 0:
            take = min(need, budget)
            chunks.append((seq, take))
            budget -= take
    admitted, budget = _admit(waiting, len(running), b.max_running, budget, left, chunks)
    if chunks and not b.mixed_chunk:
        return StepPlan(tuple(chunks), (), admitted)
    return StepPlan(tuple(chunks), tuple(decoding), admitted)


def _admit(waiting: Sequence[S], running: int, most: int, budget: int,
           left: Callable[[S], int], chunks: list[tuple[S, int]],
           took: Took = _nothing) -> tuple[int, int]:
    """Waiting sequences in order while the budget and the running cap allow, each with its
    prompt or (the last) the chunk of it that fits; appended to `chunks`. How many were
    admitted and the budget left."""
    admitted = 0
    for seq in waiting:
        if budget <= 0 or running + admitted >= most:
            break
        take = min(max(left(seq), 1), budget)
        chunks.append((seq, take))
        took(seq, take)
        budget -= take
        admitted += 1
    return admitted, budget
