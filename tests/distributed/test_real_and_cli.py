"""Sharded search on real data (the embedded Wikipedia index, real questions) and as a user runs
it: `ragraph index shard`, `ragraph run --ray`, and the error without the ray extra."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

from ragraph.cli.main import main
from ragraph.runtime.distributed.options import ScaleConfig
from ragraph.runtime.distributed.sharded import ShardedEngine
from tests.retrieval.test_real_data import default_index, nq_questions  # noqa: F401 (fixture)
from tests.retrieval.test_stepwise import assert_identical, reference, stepwise

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


def test_ray_without_the_extra_names_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code = main(["run", str(WORKFLOWS / "oneshot.rag"), "--question", "q", "--engine", "sim",
                 "--ray", "auto", "--index", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "--ray" in err and 'pip install "ragraph[ray]"' in err


def test_shards_without_ray_are_refused(capsys):
    code = main(["run", str(WORKFLOWS / "oneshot.rag"), "--question", "q", "--engine", "sim",
                 "--shards", "3"])
    assert code == 2 and "--shards" in capsys.readouterr().err


def test_real_data_is_exact_on_shards(ray_cluster, default_index, embedder, data_dir):  # noqa: F811
    engine = ShardedEngine.open(default_index.directory, ScaleConfig(shards=3, shard_cpus=0.25))
    try:
        single = default_index.engine
        queries = embedder.embed(nq_questions(data_dir, 32))
        rng = np.random.default_rng(5)
        for nprobe, n_steps in [(32, 4), (128, 7)]:
            want = reference(single, queries, 10, nprobe)
            assert_identical(stepwise(engine, queries, 10, nprobe, n_steps, rng), want)
    finally:
        engine.close()


def test_run_ray_answers_as_without_it(ray_cluster, default_index, tmp_path, capsys):  # noqa: F811
    directory = tmp_path / "index"  # a copy: `index shard` writes into the directory
    shutil.copytree(default_index.directory, directory)
    questions = ["Who directed the film 2001: A Space Odyssey?", "What is a glacier?",
                 "Who designed the Eiffel Tower?", "What instrument is played with a bow?"]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n"
                           for i, q in enumerate(questions)), encoding="utf-8")
    common = ["run", str(WORKFLOWS / "oneshot.rag"), "--input", str(src), "--engine", "sim",
              "--index", str(directory)]
    assert main(common + ["--output", str(tmp_path / "one.jsonl")]) == 0
    assert main(["index", "shard", str(directory), "--shards", "2"]) == 0
    capsys.readouterr()
    assert main(common + ["--output", str(tmp_path / "ray.jsonl"), "--ray", "auto",
                          "--shards", "2", "--shard-cpus", "0.25"]) == 0
    summary = capsys.readouterr().out
    assert "retries" in summary and "none" in summary

    def answers(name):
        rows = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        return [(r["id"], r["answer"], [p["id"] for p in r["passages"]]) for r in rows]

    assert answers("ray.jsonl") == answers("one.jsonl")


def test_bench_ray_reports_throughput_by_shards_and_replicas(ray_cluster, default_index,  # noqa: F811
                                                             capsys):
    code = main(["bench", "--ray", "auto", "--shard-counts", "1,2", "--replica-counts", "1,2",
                 "--requests", "8", "--concurrency", "4", "--shard-cpus", "0.25"])
    out = capsys.readouterr().out
    assert code == 0, out  # 0: every row gave the single-node answers
    assert "throughput vs shards and replicas" in out and "SIMULATED" in out
    assert out.count(" yes ") >= 5  # 1 node + 2 shard counts x 2 replica counts
