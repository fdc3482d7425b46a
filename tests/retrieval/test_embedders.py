"""`--embedder`: any sentence-transformers model (a directory, or a name in the local Hugging Face
cache, never a download), its prompts from its own config or flags, recorded in the manifest and
taken from it by run; query vectors batch-invariant whatever the model. The models are small
random ones written in a second (tiny_models.py): the same loading code as a real model."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ragraph.cli.main import main
from ragraph.errors import SearchIndexError
from ragraph.runtime.retrieval.embed.embedder import Embedder, EmbedderConfig, query_embedder
from ragraph.runtime.retrieval.embed.prompts import BGE_QUERY_INSTRUCTION, family_prompts
from ragraph.runtime.retrieval.embed.spec import MINILM, EmbedderSpec
from ragraph.runtime.retrieval.manifest import Manifest, load_index

from .test_build_cli import TOPICS
from .test_query_embedder import device
from .tiny_models import tiny_model

pytest.importorskip("sentence_transformers")

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = ["which instrument is played with a bow?", "lava", "", "chess board game",
             "who made the honey in the colonies of bees and flowers " * 4, "ice?", "a b c"]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """BERT with mean pooling (packed queries), XLM-RoBERTa with CLS pooling and no Normalize
    module (padded queries, positions after the padding id), each with e5-style prompts."""
    root = tmp_path_factory.mktemp("models")
    prompts = {"query": "query: ", "passage": "passage: "}
    return {"bert": tiny_model(root / "bert", prompts=prompts),
            "roberta": tiny_model(root / "roberta", arch="xlm-roberta", pooling="cls",
                                  normalize=False, prompts=prompts, hidden=48, seed=1)}


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_query_vectors_do_not_depend_on_the_batch_for_any_model(models, kind):
    spec = Embedder(EmbedderConfig(model=str(models[kind]))).spec
    embedder = query_embedder(spec, threads=1, device=device())  # a lent GPU's kernels too
    alone = np.stack([embedder.embed([q])[0] for q in QUESTIONS])
    rng = np.random.default_rng(0)
    for size in (2, 3, len(QUESTIONS)):
        order = rng.permutation(len(QUESTIONS))
        batched = np.empty_like(alone)
        for start in range(0, len(order), size):
            rows = order[start:start + size]
            batched[rows] = embedder.embed([QUESTIONS[i] for i in rows])
        same = (batched == alone).all(axis=1)
        assert same.all(), f"{kind}, batches of {size}: {int((~same).sum())} vectors differ"
    assert np.allclose(np.linalg.norm(alone, axis=1), 1.0, atol=1e-6)


def test_packed_and_padded_queries_are_the_same_vectors(models):
    """The packed path runs only where it reproduces the model (a BERT encoder): there its
    vectors are sentence-transformers' padded float64 ones, bit for bit."""
    spec = Embedder(EmbedderConfig(model=str(models["bert"]), query_precision="float64")).spec
    packed = query_embedder(spec, threads=1)
    padded = Embedder(EmbedderConfig(model=str(models["bert"]), role="query", threads=1,
                                     precision="float64"))
    assert packed._packed and not padded._packed
    assert (packed.embed(QUESTIONS) == padded.embed(QUESTIONS)).all()
    roberta = Embedder(EmbedderConfig(model=str(models["roberta"]), packed=True))
    assert not roberta._packed  # positions after the padding id: padded, as exact


def test_prompts_come_from_the_model_or_the_flags(models):
    from_config = Embedder(EmbedderConfig(model=str(models["bert"]))).spec
    assert (from_config.query_prompt, from_config.passage_prompt) == ("query: ", "passage: ")
    flagged = Embedder(EmbedderConfig(model=str(models["bert"]), query_prompt="Q ",
                                      passage_prompt="")).spec
    assert (flagged.query_prompt, flagged.passage_prompt) == ("Q ", "")
    # The prompt is really in front of the text: a query equals the passage side's embedding of
    # the prompted text.
    for precision in ("float64", "int8"):
        spec = dataclasses.replace(from_config, query_precision=precision)
        query = query_embedder(spec, threads=1).embed(["lava"])
        bare = Embedder(EmbedderConfig(model=str(models["bert"]), passage_prompt="",
                                       precision=precision)).embed(["query: lava"])
        assert (query == bare).all(), precision


def test_model_card_prompts_for_e5_and_bge_when_the_config_has_none():
    assert family_prompts("intfloat/e5-small-v2") == family_prompts("/m/multilingual-e5-base")
    assert family_prompts("intfloat/e5-small-v2").query == "query: "
    assert family_prompts("BAAI/bge-small-en-v1.5").query == BGE_QUERY_INSTRUCTION
    assert family_prompts("BAAI/bge-small-en-v1.5").passage == ""
    assert family_prompts("sentence-transformers/all-MiniLM-L6-v2").query == ""
    assert family_prompts("intfloat/e5-mistral-7b-instruct").query == ""


def write_corpus(path: Path) -> Path:
    path.write_text("".join(json.dumps({"title": t, "text": f"{x} ({n})"}) + "\n"
                            for n in range(4) for t, x in TOPICS.items()), encoding="utf-8")
    return path


def test_build_records_the_embedder_and_run_takes_it_from_the_index(models, tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl")
    out = tmp_path / "idx"
    assert main(["index", "build", "--corpus", str(corpus), "--out", str(out), "--index-type",
                 "flat", "--embedder", str(models["roberta"]), "--query-prompt", "find: "]) == 0
    spec = Manifest.read(out).embedder_spec
    assert spec == EmbedderSpec(str(models["roberta"]), 48, "find: ", "passage: ")
    # run opens the index's own embedder: its search equals the index searched with it directly.
    question = "which instrument is played with a bow?"
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": "a", "question": question}) + "\n")
    assert main(["run", str(ROOT / "workflows" / "oneshot.rag"), "--engine", "sim", "--index",
                 str(out), "-i", str(tmp_path / "q.jsonl"), "-o", str(tmp_path / "a.jsonl")]) == 0
    got = [p["id"] for p in json.loads((tmp_path / "a.jsonl").read_text())["passages"]]
    loaded = load_index(out)
    vector = query_embedder(spec, threads=1).embed([question])
    _, ids = loaded.engine.search(vector, 5, 1)
    assert got == [int(i) for i in ids[0]]


def test_a_model_changed_since_the_build_is_one_line_naming_both(models, tmp_path):
    moved = shutil.copytree(models["bert"], tmp_path / "model")
    spec = Embedder(EmbedderConfig(model=str(moved))).spec
    shutil.rmtree(moved)
    shutil.copytree(models["roberta"], moved)  # another model where the index's was
    with pytest.raises(SearchIndexError) as caught:
        query_embedder(spec)
    assert "32-dimensional vectors" in str(caught.value) and "answers 48" in str(caught.value)
    shutil.rmtree(moved)
    with pytest.raises(SearchIndexError, match="not a model directory|neither a directory"):
        query_embedder(spec)


def test_a_name_is_looked_up_in_the_local_cache_and_never_downloaded(models, tmp_path,
                                                                      monkeypatch):
    from huggingface_hub import constants

    snapshot = tmp_path / "hub" / "models--acme--tiny-embedder" / "snapshots" / ("0" * 40)
    shutil.copytree(models["bert"], snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    embedder = Embedder(EmbedderConfig(model="acme/tiny-embedder"))
    assert embedder.spec.name == "acme/tiny-embedder" and embedder.dim == 32
    with pytest.raises(SearchIndexError) as caught:
        Embedder(EmbedderConfig(model="BAAI/bge-small-en-v1.5"))
    message = str(caught.value)
    assert "nor in the local Hugging Face cache" in message and "never downloads" in message
    assert "hf download BAAI/bge-small-en-v1.5" in message


def test_an_index_without_the_record_is_read_as_minilm(tmp_path):
    """Indexes built before the manifest recorded the embedder keep working, as MiniLM."""
    Manifest(embedder=MINILM.name, dim=384, metric="ip", nlist=1, index_type="flat",
             passages=0, checksum="0").write(tmp_path)
    raw = json.loads((tmp_path / "manifest.json").read_text())
    del raw["embedding"]
    (tmp_path / "manifest.json").write_text(json.dumps(raw))
    assert Manifest.read(tmp_path).embedder_spec == MINILM
    raw["embedding"] = {**MINILM.to_json(), "dim": 768}
    (tmp_path / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(SearchIndexError, match="field 'embedding' names"):
        Manifest.read(tmp_path)
    raw["embedding"] = {**MINILM.to_json(), "normalize": "yes"}
    (tmp_path / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(SearchIndexError, match="'embedding.normalize' must be bool"):
        Manifest.read(tmp_path)
