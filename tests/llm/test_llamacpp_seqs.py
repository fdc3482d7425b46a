"""Step planning, sequence ids, KV prefix reuse and cache-aware admission of the llama.cpp
engine, on a fake KV."""

from collections import deque

import numpy as np

from ragraph.runtime.llm import GenerationRequest
from ragraph.runtime.llm.llamacpp.admission import AdmissionRule, admit
from ragraph.runtime.llm.llamacpp.prefix_store import PrefixStore, common_prefix
from ragraph.runtime.llm.llamacpp.seqs import Seq, forwards, plan_step
from ragraph.runtime.llm.llamacpp.slots import SeqSlots
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.llm.textout import OutputText


class FakeKv:
    def __init__(self) -> None:
        self.ops: list[tuple] = []
        self.pos_min: dict[int, int] = {}

    def seq_rm(self, seq_id: int) -> None:
        self.ops.append(("rm", seq_id))

    def seq_keep(self, seq_id: int, n_tokens: int) -> None:
        self.ops.append(("keep", seq_id, n_tokens))

    def seq_copy(self, src: int, dst: int) -> None:
        self.ops.append(("cp", src, dst))

    def seq_pos_min(self, seq_id: int) -> int:
        return self.pos_min.get(seq_id, 0)


def seq(tokens: list[int], n_past: int, seq_id: int = 0, n_prompt: int | None = None) -> Seq:
    """A sequence of `tokens`, the first `n_prompt` (all) its prompt, the rest generated."""
    n_prompt = len(tokens) if n_prompt is None else n_prompt
    r = GenerationRequest(f"r{seq_id}", prompt_ids=tuple(tokens[:n_prompt]))
    s = Seq(r, GenerationStream(r.rid, lambda _rid: None), list(tokens), n_prompt, seq_id,
            OutputText(), None)
    s.n_past = n_past
    return s


def test_decode_pass_lists_every_decoding_sequence_by_id_and_prefills_fill_the_batch() -> None:
    a = seq(list(range(1000)), 0, 3)  # prefilling, 1000 pending, admitted first
    b = seq([1, 2, 3], 2, 1)  # decoding
    c = seq(list(range(300)), 0, 2)  # prefilling
    d = seq([4, 5], 1, 0)  # decoding
    plan = plan_step([a, b, c, d], n_batch=512)
    assert [s.seq_id for s in plan.decode] == [0, 1]
    assert [(s.seq_id, k) for s, k in plan.prefill] == [(3, 512)]  # decode tokens cost no budget
    a.n_past = 900
    plan = plan_step([a, b, c, d], n_batch=512)
    # Admission order decides who gets the budget; the pass lists them by id.
    assert [(s.seq_id, k) for s, k in plan.prefill] == [(2, 300), (3, 100)]


def test_a_steps_passes_count_the_positions_they_compute() -> None:
    # What the engine's counters add for pricing attention (bench.measure.bounds): each decoding
    # sequence its one position, each prefill chunk its positions from n_past on.
    a = seq(list(range(1000)), 900, 3)  # prefills 100 tokens at positions 900..999
    b = seq([1, 2, 3], 2, 1, n_prompt=2)  # decodes position 2
    d = seq([4, 5], 1, 0, n_prompt=1)  # decodes position 1
    plan = plan_step([a, b, d], n_batch=512)
    assert plan.decode_context() == 2 + 1
    assert plan.prefill_context() == sum(range(900, 1000))


def test_forwards_are_runs_of_consecutive_ids_with_equal_chunks() -> None:
    # llama.cpp's split_equal(sequential=True), which the bench counts: one forward for the
    # run of consecutive ids from the lowest with tokens left, the fewest any has left each.
    assert forwards([(0, 4), (1, 4)], 512) == 1
    assert forwards([(0, 50), (1, 30), (2, 40)], 512) == 3  # 3x30, then 0 and 2 apart: 1x20, 1x10
    assert forwards([(0, 1), (1, 1), (3, 1)], 512) == 2  # a hole splits a decode pass
    assert forwards([(0, 600)], 512) == 2  # n_ubatch tokens a forward at most
    assert forwards([(2, 300), (3, 300)], 512) == 2  # 2x256, then 2x44
    assert forwards([(5, 0), (6, 7)], 512) == 1  # nothing to compute is no forward
    assert forwards([], 512) == 0


def test_common_prefix() -> None:
    assert common_prefix(np.array([1, 2, 3]), np.array([1, 2, 4, 5])) == 2
    assert common_prefix(np.array([1, 2]), np.array([1, 2, 3])) == 2


def test_running_ids_are_the_lowest_free_ones_and_stay_dense() -> None:
    kv = FakeKv()
    slots = SeqSlots(kv, n_running=4, n_store=0, n_swa=0)
    seqs = [seq([1, 2], 2, slots.acquire()) for _ in range(4)]
    assert [s.seq_id for s in seqs] == [0, 1, 2, 3]
    assert slots.acquire() is None
    slots.release(seqs[1])
    assert slots.acquire() == 1  # a new sequence fills the hole
    slots.release(seqs[1])
    slots.release(seqs[0])
    kv.ops.clear()
    slots.compact([seqs[2], seqs[3]])  # ids 0 and 1 are holes below 2 and 3
    assert kv.ops == [("cp", 3, 0), ("rm", 3), ("cp", 2, 1), ("rm", 2)]
    assert (seqs[3].seq_id, seqs[2].seq_id) == (0, 1)
    assert slots.acquire() == 2


def test_compaction_leaves_dense_ids_alone() -> None:
    kv = FakeKv()
    slots = SeqSlots(kv, n_running=4, n_store=0, n_swa=0)
    running = [seq([1], 1, slots.acquire()) for _ in range(2)]
    slots.compact(running)
    assert kv.ops == []


def test_a_finished_sequence_is_stored_and_serves_a_continuation_but_its_last_token() -> None:
    kv = FakeKv()
    slots = SeqSlots(kv, n_running=2, n_store=2, n_swa=512)
    first = seq([5, 6, 7, 8], 4, slots.acquire())
    slots.release(first)
    assert ("cp", 0, 2) in kv.ops  # running id 0 -> store id 2, then id 0 is free
    dst = slots.acquire()
    assert slots.reuse_prefix(dst, [5, 6, 7, 8, 9], running=[]) == 4
    assert kv.ops[-2:] == [("cp", 2, dst), ("keep", dst, 4)]
    # The same prompt again: everything but the last token.
    assert slots.reuse_prefix(dst, [5, 6, 7, 8], running=[]) == 3


def test_running_sequences_share_their_computed_prefix() -> None:
    kv = FakeKv()
    slots = SeqSlots(kv, n_running=2, n_store=0, n_swa=0)
    running = seq([1, 2, 3, 4, 5, 6], n_past=4, seq_id=slots.acquire())
    dst = slots.acquire()
    assert slots.reuse_prefix(dst, [1, 2, 3, 4, 5, 6, 7], [running]) == 4  # only what is computed


def test_sliding_window_cells_gone_means_no_reuse() -> None:
    kv = FakeKv()
    slots = SeqSlots(kv, n_running=1, n_store=2, n_swa=4)
    slots.release(seq(list(range(20)), 20, slots.acquire()))
    store_id = 1
    kv.pos_min[store_id] = 10  # llama.cpp overwrote the window cells below position 10
    dst = slots.acquire()
    assert slots.reuse_prefix(dst, list(range(12)) + [99], []) == 0  # needs positions 8..11
    assert slots.reuse_prefix(dst, list(range(16)) + [99], []) == 16  # needs 12..15: present


def tokens(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_store_evicts_by_pgdsf_priority_and_keeps_what_is_reused() -> None:
    store = PrefixStore([10, 11])
    a = store.place(tokens(1, 2, 3, 4))
    b = store.place(tokens(5, 6, 7, 8))
    assert (a.slot, b.slot) == (10, 11) and a.replaces is None
    store.hit(a.slot)  # a served a prefix: hits x tokens = 8 against b's 4
    c = store.place(tokens(9, 9, 9, 9))
    assert c.slot == b.slot and c.replaces.tokens.tolist() == [5, 6, 7, 8]
    assert store.clock == 4  # the clock rose to the evicted priority: new entries age the old
    assert sorted(e.slot for e in store) == [10, 11]


def test_store_skips_what_it_already_covers_and_extends_continuations() -> None:
    store = PrefixStore([10, 11])
    store.place(tokens(1, 2, 3, 4))
    assert store.place(tokens(1, 2, 3)) is None  # already held, and more
    grown = store.place(tokens(1, 2, 3, 4, 5, 6))
    assert grown.slot == 10 and len(store) == 1  # the continuation took its prefix's slot
    assert [e.tokens.tolist() for e in store] == [[1, 2, 3, 4, 5, 6]]


def test_store_refuses_a_short_sequence_when_every_entry_outranks_it() -> None:
    store = PrefixStore([10])
    store.place(tokens(*range(100)))
    assert store.place(tokens(7, 7)) is None
    assert store.place(tokens(*range(200, 400))) is not None  # longer: worth more


RULE = AdmissionRule(hold_limit=3, min_gain=8)


def waiting(*prompts: list[int]) -> deque[Seq]:
    return deque(seq(p, 0, -1) for p in prompts)


def test_the_second_of_two_equal_prompts_waits_for_the_first_prefill_and_copies_it() -> None:
    kv = FakeKv()
    slots = SeqSlots(kv, n_running=4, n_store=0, n_swa=0)
    prompt = list(range(100))
    queue, running = waiting(prompt, list(prompt)), []
    assert [s.cached for s in admit(queue, running, slots, 4, RULE)] == [0]
    assert len(queue) == 1 and queue[0].held == 1  # the first is computing what it needs
    running[0].n_past = 60  # the first's prefill is past 60 of its tokens
    assert admit(queue, running, slots, 4, RULE) == [] and queue[0].held == 2
    running[0].n_past = 100
    second = admit(queue, running, slots, 4, RULE)
    assert [s.cached for s in second] == [99] and not queue  # all but the last token


def test_a_held_prompt_is_admitted_after_the_starvation_bound() -> None:
    slots = SeqSlots(FakeKv(), n_running=4, n_store=0, n_swa=0)
    prompt = list(range(100))
    queue, running = waiting(prompt, list(prompt)), []
    admit(queue, running, slots, 4, RULE)
    rounds = 1
    while queue and rounds < 100:  # the first never advances: a stalled or long prefill
        admit(queue, running, slots, 4, RULE)
        rounds += 1
    assert rounds == RULE.hold_limit + 1 and running[1].cached == 0


def test_only_prompts_sharing_enough_wait_and_they_do_not_block_others() -> None:
    slots = SeqSlots(FakeKv(), n_running=4, n_store=0, n_swa=0)
    base = list(range(100))
    queue = waiting(base, base[:5] + [900] * 50, list(base), list(range(500, 560)))
    running: list[Seq] = []
    admitted = admit(queue, running, slots, 4, RULE)
    # 5 shared tokens are not worth a round (min_gain 8); the equal prompt waits; the one
    # behind it, sharing nothing, starts.
    assert [s.tokens[0] for s in admitted] == [0, 0, 500]
    assert [s.held for s in queue] == [1]


def test_a_sequences_token_array_follows_its_tokens_and_is_built_once_per_length() -> None:
    s = seq([1, 2, 3], n_past=3, seq_id=0)
    first = s.token_array()
    assert first.tolist() == [1, 2, 3] and s.token_array() is first  # not rebuilt each round
    s.tokens.append(4)
    assert s.token_array().tolist() == [1, 2, 3, 4]


def test_prefilling_sequences_between_decoding_ones_join_the_decode_pass() -> None:
    # llama.cpp runs ids 0, 2 without 1 as two forwards; with 1's next prompt token it is one.
    a = seq([1, 2, 3], 2, 0, n_prompt=2)  # decoding
    b = seq(list(range(100)), 10, 1)  # prefilling: 90 tokens pending
    c = seq([4, 5, 6], 2, 2, n_prompt=2)  # decoding
    plan = plan_step([a, b, c], n_batch=512)
    assert [(s.seq_id, k) for s, k in plan.decode_pass()] == [(0, 1), (1, 1), (2, 1)]
    assert plan.decode == [a, c] and plan.fill == [b]
    assert [(s.seq_id, k) for s, k in plan.prefill] == [(1, 89)]  # the rest, after the fill
    assert plan.decode_context() == 2 + 2 and plan.pass_prompt_context() == 10
    # The step's prompt tokens stay within n_batch: the fill comes out of the prefill budget.
    plan = plan_step([a, seq(list(range(600)), 0, 1), c], n_batch=512)
    assert [(s.seq_id, k) for s, k in plan.prefill] == [(1, 511)]
    # A sequence above the decoding ones needs no filling; one whose KV reaches further than
    # theirs would make them attend further (llama.cpp pads to the longest): not filled.
    d = seq(list(range(400)), 300, 3)
    far = seq(list(range(1000)), 700, 1)
    plan = plan_step([a, far, c, d], n_batch=512)
    assert plan.fill == [] and [s.seq_id for s, _ in plan.decode_pass()] == [0, 2]
    assert [(s.seq_id, k) for s, k in plan.prefill] == [(1, 300), (3, 100)]


def test_a_prompt_token_in_the_decode_pass_is_prompt_work_and_no_decoding_sequence() -> None:
    # The bound (bench.measure.bounds) prices prompt tokens at the prefill rate and each decoding
    # sequence at a step's rate a sequence: a prompt token counted as both was priced twice.
    # A prompt whose prefix was reused has its last token left (its logits give the first
    # generated token): it rides in the decode pass, and so does a filler's next token.
    gen = seq([1, 2, 3, 9], 3, 0, n_prompt=3)  # feeds back its generated token, position 3
    cached = seq(list(range(50, 70)), 19, 1)  # a reused prefix: its last prompt token left
    filler = seq(list(range(100, 200)), 10, 2)  # prefilling between decoding ids
    top = seq([5, 6, 7], 2, 3, n_prompt=2)  # generating, position 2
    plan = plan_step([gen, cached, filler, top], n_batch=512)
    assert [s.seq_id for s, _ in plan.decode_pass()] == [0, 1, 2, 3]
    assert plan.decode == [gen, cached, top] and plan.fill == [filler]
    assert plan.generating() == [gen, top]  # the decode step's sequences
    assert plan.decode_context() == 3 + 2
    assert plan.pass_prompt_context() == 19 + 10  # the prompt tokens' positions, once
    assert [(s.seq_id, k) for s, k in plan.prefill] == [(2, 89)]  # the filler's rest
