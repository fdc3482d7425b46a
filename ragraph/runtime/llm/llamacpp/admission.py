"""Cache-aware admission of the llama.cpp engine (RAGCache): which waiting sequences join the
batch this iteration.

Repeated traffic submits the same prompt twice at once (a popular question asked by two users,
two requests that retrieved the same documents). Admitted together, both compute the shared
prefix side by side. So a waiting prompt whose prefix a running sequence is computing right now
is held back until that prefill has passed it, and then copies the KV instead of computing it.
A prompt is held at most `hold_limit` admission rounds (the starvation bound): after that it is
admitted and computes whatever is not ready, so nothing waits forever on a long prefill.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ragraph.runtime.llm.llamacpp.seqs import Seq
from ragraph.runtime.llm.llamacpp.slots import SeqSlots


@dataclass(frozen=True)
class AdmissionRule:
    # Rounds (decode-thread iterations) a prompt may wait for another's prefill: a round runs
    # up to n_batch prompt tokens, so 64 of them cover any prefill ahead of it at the
    # 2,048-token context many times over.
    hold_limit: int = 64
    # Hold only for at least this many prompt tokens: for fewer, waiting a round costs more
    # than computing them.
    min_gain: int = 32

    def hold(self, ready: int, coming: int, held: int) -> bool:
        """Whether a prompt with `ready` prefix tokens reusable now, and `coming` tokens once
        the running prefills pass them, waits this round, having waited `held` rounds."""
        return held < self.hold_limit and coming - ready >= self.min_gain


def admit(waiting: deque[Seq], running: list[Seq], slots: SeqSlots, max_running: int,
          rule: AdmissionRule) -> list[Seq]:
    """Move the waiting sequences that may start into `running`, in arrival order, each with
    the longest prefix KV it can copy; the held ones stay in `waiting`. Returns those admitted.
    An admitted sequence counts as running for the ones behind it: the second of two equal
    prompts arriving together waits for the first."""
    admitted: list[Seq] = []
    for seq in list(waiting):
        if len(running) >= max_running:
            break
        coming = slots.prefix_coming(seq.tokens, running)
        if coming and rule.hold(slots.prefix_ready(seq.tokens, running), coming, seq.held):
            seq.held += 1
            continue
        seq_id = slots.acquire()
        if seq_id is None:
            break
        waiting.remove(seq)
        seq.seq_id = seq_id
        seq.cached = slots.reuse_prefix(seq_id, seq.tokens, running)
        seq.n_past = seq.cached
        running.append(seq)
        admitted.append(seq)
    return admitted
