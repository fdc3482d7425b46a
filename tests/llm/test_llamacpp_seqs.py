"""Step planning and KV prefix reuse of the llama.cpp engine, on a fake KV (no model)."""

import numpy as np

from ragraph.runtime.llm import GenerationRequest
from ragraph.runtime.llm.llamacpp_seqs import Seq, SeqPool, common_prefix, plan_step
from ragraph.runtime.llm.stream import GenerationStream
from ragraph.runtime.llm.textout import OutputText


class FakeKv:
    def __init__(self) -> None:
        self.ops: list[tuple] = []
        self.pos_min: dict[int, int] = {}

    def seq_rm(self, seq_id: int) -> None:
        self.ops.append(("rm", seq_id))

    def seq_cp(self, src: int, dst: int, n_tokens: int) -> None:
        self.ops.append(("cp", src, dst, n_tokens))

    def seq_pos_min(self, seq_id: int) -> int:
        return self.pos_min.get(seq_id, 0)


def seq(tokens: list[int], n_past: int, seq_id: int = 0) -> Seq:
    r = GenerationRequest(f"r{seq_id}", prompt_ids=tuple(tokens))
    s = Seq(r, GenerationStream(r.rid, lambda _rid: None), list(tokens), len(tokens), seq_id,
            OutputText(), None)
    s.n_past = n_past
    return s


def test_decoding_sequences_first_then_prefill_chunks() -> None:
    a = seq(list(range(1000)), 0, 0)  # prefilling, 1000 pending
    b = seq([1, 2, 3], 2, 1)  # decoding
    c = seq(list(range(300)), 0, 2)  # prefilling
    plan = plan_step([a, b, c], n_batch=512)
    assert [(s.seq_id, k) for s, k in plan] == [(1, 1), (0, 511)]
    a.n_past = 999  # now a decodes too; c gets the rest
    plan = plan_step([a, b, c], n_batch=512)
    assert [(s.seq_id, k) for s, k in plan] == [(0, 1), (1, 1), (2, 300)]


def test_common_prefix() -> None:
    assert common_prefix(np.array([1, 2, 3]), np.array([1, 2, 4, 5])) == 2
    assert common_prefix(np.array([1, 2]), np.array([1, 2, 3])) == 2


def test_continuation_reuses_retired_kv_but_computes_the_last_token() -> None:
    kv = FakeKv()
    pool = SeqPool(kv, n_ids=4, keep_retired=2, n_swa=512)
    first = pool.acquire()
    pool.retire(first, [5, 6, 7, 8])
    dst = pool.acquire()
    assert pool.reuse_prefix(dst, [5, 6, 7, 8, 9], running=[]) == 4
    assert kv.ops[-1] == ("cp", first, dst, 4)
    # The same prompt again: everything but the last token.
    dst2 = pool.acquire()
    assert pool.reuse_prefix(dst2, [5, 6, 7, 8], running=[]) == 3


def test_running_sequences_share_their_computed_prefix() -> None:
    kv = FakeKv()
    pool = SeqPool(kv, n_ids=4, keep_retired=2, n_swa=0)
    running = seq([1, 2, 3, 4, 5, 6], n_past=4, seq_id=pool.acquire())
    dst = pool.acquire()
    assert pool.reuse_prefix(dst, [1, 2, 3, 4, 5, 6, 7], [running]) == 4  # only what is computed


def test_lru_evicts_oldest_and_frees_its_kv() -> None:
    kv = FakeKv()
    pool = SeqPool(kv, n_ids=3, keep_retired=1, n_swa=0)
    a, b = pool.acquire(), pool.acquire()
    pool.retire(a, [1, 2])
    pool.retire(b, [3, 4])
    assert ("rm", a) in kv.ops and pool.retired_cells == 2


def test_sliding_window_cells_gone_means_no_reuse() -> None:
    kv = FakeKv()
    pool = SeqPool(kv, n_ids=3, keep_retired=2, n_swa=4)
    a = pool.acquire()
    pool.retire(a, list(range(20)))
    kv.pos_min[a] = 10  # llama.cpp overwrote a's window cells below position 10
    dst = pool.acquire()
    assert pool.reuse_prefix(dst, list(range(12)) + [99], []) == 0  # needs positions 8..11
    assert pool.reuse_prefix(dst, list(range(16)) + [99], []) == 16  # needs 12..15: present
