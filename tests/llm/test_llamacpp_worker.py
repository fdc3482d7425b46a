"""The llama.cpp decode thread's counters over a whole run, on a fake model: what
`bench.measure.bounds` prices. Each token is counted once, by what it is: every prompt position
once as prompt work (prefill passes, fillers riding in the decode pass, a prompt's last token
left alone), every generated token fed back as a decode step's sequence; each pass's seconds are
its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest

from ragraph.ir import Sampling
from ragraph.runtime.llm.llamacpp import worker as worker_module
from ragraph.runtime.llm.llamacpp.model import BatchEntry
from ragraph.runtime.llm.llamacpp.slots import SeqSlots
from ragraph.runtime.llm.llamacpp.worker import DecodeWorker, Stop, Submit, WorkerLimits
from ragraph.runtime.llm.protocol import EngineCounters, GenerationRequest, positions
from ragraph.runtime.llm.stream import GenerationStream

N_VOCAB = 1000
TOKEN = 7  # every sampled token


@dataclass
class FakeModel:
    """A model whose every forward costs one second a token on its own clock and always
    predicts TOKEN; its KV operations do nothing."""

    shape: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(n_batch=8))
    n_vocab: int = N_VOCAB
    now: float = 0.0
    passes: list[list[BatchEntry]] = field(default_factory=list)

    def decode(self, entries: list[BatchEntry]) -> int:
        self.passes.append(list(entries))
        self.now += len(entries)
        return 0

    def logits(self, index: int) -> np.ndarray:
        row = np.zeros(N_VOCAB, dtype=np.float32)
        row[TOKEN] = 1.0
        return row

    def is_eog(self, token: int) -> bool:
        return False

    def piece(self, token: int) -> bytes:
        return b"x"

    def seq_rm(self, seq_id: int) -> None: ...

    def seq_keep(self, seq_id: int, n_tokens: int) -> None: ...

    def seq_copy(self, src: int, dst: int) -> None: ...

    def seq_pos_min(self, seq_id: int) -> int:
        return 0


def request(rid: str, first: int, prompt: int, generate: int) -> Submit:
    r = GenerationRequest(rid, prompt_ids=tuple(range(first, first + prompt)),
                          params=Sampling(max_tokens=generate))
    return Submit(r, GenerationStream(rid, lambda _rid: None))


def run_worker(model: FakeModel, monkeypatch: pytest.MonkeyPatch) -> EngineCounters:
    """Four requests on 8-token prefill passes: A (id 0), B (id 1, its 6-token prompt cut to
    leave its last token alone in the next decode pass), C (id 2); when B ends, D (30 tokens)
    takes id 1, between A and C decoding, and prefills there, riding one token a step in the
    decode pass."""
    monkeypatch.setattr(worker_module, "time", SimpleNamespace(perf_counter=lambda: model.now))
    tally = EngineCounters()
    ended: list[str] = []
    later = request("D", 400, 30, 4)

    def post(deliveries) -> None:
        for _stream, _events, result in deliveries:
            if result is None:
                continue
            ended.append(result.rid)
            if result.rid == "B":
                work.inbox.put(later)
            elif len(ended) == 4:
                work.inbox.put(Stop())

    work = DecodeWorker(model, SeqSlots(model, 4, 0, 0), WorkerLimits(512, 4), tally, post)
    for r in (request("A", 100, 3, 16), request("B", 200, 6, 2), request("C", 300, 4, 16)):
        work.inbox.put(r)
    work.run()
    assert sorted(ended) == ["A", "B", "C", "D"]
    return tally


def test_each_token_is_counted_once_by_what_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    model = FakeModel()
    tally = run_worker(model, monkeypatch)
    shapes = {"A": (3, 16), "B": (6, 2), "C": (4, 16), "D": (30, 4)}  # prompt, generated
    assert tally.prompt_tokens == 43 and tally.cached_tokens == 0
    assert tally.completion_tokens == 38
    # Every prompt position once, whichever pass computed it.
    assert tally.prefill_context == sum(positions(0, n) for n, _ in shapes.values())
    # A generation's first token comes from its prompt's last token (B's rode in a decode
    # pass); each later one from feeding back the one before, at its position.
    assert tally.decode_tokens == sum(k - 1 for _, k in shapes.values())
    assert tally.decode_context == sum(positions(n, k - 1) for n, k in shapes.values())
    # D filled: decode passes over ids 0, 1, 2 with D's prompt token (no logits) between.
    d_prompt = range(400, 430)
    fills = [p for p in model.passes if [e.seq_id for e in p] == [0, 1, 2]
             and p[1].token in d_prompt and not p[1].logits]
    assert len(fills) == 4  # 30 tokens at 1 + 7 a step: 4 steps, the last finishing it


def test_a_passes_seconds_are_its_own_prompt_tokens_riding_in_the_decode_pass_included(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # No timer splits a forward: the decode pass's prompt tokens (B's last, D's 4 fills) are in
    # decode_s; prefill_s holds the prefill passes' 43 - 5 tokens (a second a token here).
    model = FakeModel()
    tally = run_worker(model, monkeypatch)
    assert tally.prefill_s == 43 - 5
    assert tally.decode_s == sum(len(p) for p in model.passes) - (43 - 5)
    assert tally.decode_s == tally.decode_tokens + 5


def run_all(model: FakeModel, monkeypatch: pytest.MonkeyPatch, submits: list[Submit],
            n_running: int = 4) -> EngineCounters:
    """`submits` together on 8-token passes, until each has ended."""
    monkeypatch.setattr(worker_module, "time", SimpleNamespace(perf_counter=lambda: model.now))
    tally = EngineCounters()
    ended: list[str] = []

    def post(deliveries) -> None:
        ended.extend(result.rid for _stream, _events, result in deliveries if result is not None)
        if len(ended) == len(submits):
            work.inbox.put(Stop())

    work = DecodeWorker(model, SeqSlots(model, n_running, 0, 0), WorkerLimits(512, n_running),
                        tally, post)
    for s in submits:
        work.inbox.put(s)
    work.run()
    return tally


@pytest.mark.parametrize(("prompts", "expected", "calls"),
                         [((4, 4), 1, 1), ((3, 5), 2, 1), ((20,), 3, 3)])
def test_prompt_passes_count_llama_cpps_forwards(monkeypatch: pytest.MonkeyPatch,
                                                  prompts: tuple[int, ...], expected: int,
                                                  calls: int) -> None:
    # Two prompts of 4 are one forward of 2x4 tokens; of 3 and 5, two (2x3, then 1x2) in one
    # call; one of 20 takes three 8-token passes (8, 8, 4).
    submits = [request(f"r{i}", 100 * (i + 1), n, 2) for i, n in enumerate(prompts)]
    tally = run_all(FakeModel(), monkeypatch, submits)
    assert tally.prefill_forwards == expected
    assert tally.kv_copies == tally.copy_passes == 0
    # The bound's floor counts calls, not forwards (the forwards of one call share its costs).
    assert sum(tally.prompt_passes) == calls
    assert sum(tally.prompt_pass_tokens) == sum(prompts)


@dataclass
class CopyingModel(FakeModel):
    copies: list[tuple[int, int]] = field(default_factory=list)
    copies_before_pass: list[int] = field(default_factory=list)

    def seq_copy(self, src: int, dst: int) -> None:
        self.copies.append((src, dst))

    def decode(self, entries: list[BatchEntry]) -> int:
        self.copies_before_pass.append(len(self.copies))
        return super().decode(entries)


def test_kv_copies_are_counted_with_the_pass_that_applies_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # B (id 1) ends first between A (0) and C (2): C moves down into id 1, one whole-stream copy
    # that llama.cpp applies as the next pass starts.
    model = CopyingModel()
    tally = run_all(model, monkeypatch, [request("A", 100, 2, 12), request("B", 200, 2, 2),
                                         request("C", 300, 2, 12)])
    assert model.copies == [(2, 1)]
    assert tally.kv_copies == 1
    passes_after_copies = sum(1 for before, after in zip(
        [0, *model.copies_before_pass], model.copies_before_pass, strict=False) if after > before)
    assert tally.copy_passes == passes_after_copies == 1


def test_decode_passes_with_prompt_tokens_riding_count_as_mixed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # B's last prompt token and D's 4 fills rode in 5 decode passes (run_worker); the others
    # only decoded.
    model = FakeModel()
    tally = run_worker(model, monkeypatch)
    assert tally.mixed_steps == 5
    assert tally.mixed_steps + tally.decode_only_steps == tally.decode_steps
