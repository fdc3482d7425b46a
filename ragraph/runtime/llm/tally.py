"""The mutable per-engine tallies behind `EngineCounters` snapshots."""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.runtime.llm.protocol import EngineCounters


@dataclass
class Tally:
    requests: int = 0
    finished: int = 0
    aborted: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    steps: int = 0
    # Where the engine's time went (llama.cpp: seconds inside llama_decode, by pass kind).
    prefill_s: float = 0.0
    decode_s: float = 0.0
    decode_steps: int = 0

    def count_finish(self, reason: str) -> None:
        if reason == "abort":
            self.aborted += 1
        elif reason == "error":
            self.failed += 1
        else:
            self.finished += 1

    def snapshot(self, simulated: bool = False) -> EngineCounters:
        return EngineCounters(
            requests=self.requests,
            finished=self.finished,
            aborted=self.aborted,
            failed=self.failed,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            completion_tokens=self.completion_tokens,
            steps=self.steps,
            prefill_s=self.prefill_s,
            decode_s=self.decode_s,
            decode_steps=self.decode_steps,
            simulated=simulated,
        )
