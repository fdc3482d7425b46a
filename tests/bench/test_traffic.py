"""`--traffic`: uniform or Zipf-popular questions, the same for every executor of a cell, and
the document popularity they produce (RAGCache's top-3% share)."""

from __future__ import annotations

import asyncio
import csv
from collections import Counter
from pathlib import Path

import pytest

from ragraph.bench.data.index import IndexSpec, ensure_bench_index
from ragraph.bench.data.questions import QuestionPool
from ragraph.bench.data.traffic import UNIFORM, Traffic, top_share
from ragraph.bench.output import report
from ragraph.bench.output.results import write_csv
from ragraph.bench.run.config import BenchConfig
from ragraph.bench.run.session import Workbench, make_jobs, run_cells
from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.retrieval.manifest import load_index
from ragraph.runtime.search_service import SearchService
from tests.runtime import workflows
from tests.runtime.fakes import HashEmbedder

from .helpers import TOPICS, toy_base


def test_traffic_parses_uniform_and_zipf_and_names_the_flag_on_bad_input():
    assert Traffic.parse("uniform") == UNIFORM
    assert Traffic.parse("zipf:1.2") == Traffic(1.2) and str(Traffic(1.2)) == "zipf:1.2"
    for bad in ("zipf:0", "zipf:-1", "zipf:x", "zipf:", "zipf:nan", "zipf:inf", "pareto:1", ""):
        with pytest.raises(ConfigError) as err:
            Traffic.parse(bad)
        assert err.value.field == "--traffic"


def test_the_bench_flag_reaches_the_config_and_a_bad_value_names_it():
    from ragraph.cli import cmd_bench
    from ragraph.cli.main import build_parser

    def config(*flags: str) -> BenchConfig:
        return cmd_bench.config_from(build_parser().parse_args(["bench", *flags]))

    assert config().traffic == UNIFORM
    assert config("--traffic", "zipf:1.0", "--quick").traffic == Traffic(1.0)
    with pytest.raises(ConfigError, match="--traffic"):
        config("--traffic", "zipf:0")


def test_uniform_walks_the_list_from_the_offset():
    assert UNIFORM.picks(5, 7, offset=3, seed=9) == [3, 4, 0, 1, 2, 3, 4]


def test_the_zipf_draw_is_seeded_and_the_top_questions_are_asked_most():
    zipf = Traffic(1.0)
    picks = zipf.picks(200, 4000, offset=0, seed=3)
    assert picks == zipf.picks(200, 4000, offset=0, seed=3)
    assert picks != zipf.picks(200, 4000, offset=0, seed=4)
    counts = Counter(picks)
    assert [rank for rank, _ in counts.most_common(3)] == [0, 1, 2]
    # p(rank 1) / p(rank 10) = 10 under alpha 1.
    assert counts[0] > 5 * counts[9]
    # A steeper alpha concentrates more on the head.
    steep = Counter(Traffic(2.0).picks(200, 4000, offset=0, seed=3))
    assert steep[0] > counts[0]


def test_top_share_on_a_hand_made_example():
    # 40 distinct documents: the top 3% is ceil(1.2) = 2 of them. Document 7 is retrieved 10
    # times, 8 five times, 38 others once: 15 of 53 retrievals.
    retrievals = [[7, 8]] * 5 + [[7]] * 5 + [[100 + i] for i in range(38)]
    assert top_share(retrievals) == pytest.approx(15 / 53)
    # Fewer than 34 documents: the top one alone.
    assert top_share([[1, 2], [1, 3], [1, 4]]) == pytest.approx(3 / 6)
    assert top_share([]) is None and top_share([[]]) is None


def _bench(tmp_path: Path, traffic: Traffic,
           executors: tuple[str, ...] = ("ragraph", "sequential", "stage-batched")) -> Workbench:
    info = ensure_bench_index(tmp_path / "cache", toy_base(300), IndexSpec(scale=3000))
    loaded = load_index(Path(info.directory))
    search = SearchService(loaded.engine, HashEmbedder(), loaded.store, nprobe=8)
    # A pool larger than a run, so uniform traffic asks every question once.
    pool = tuple((f"question {i} about {TOPICS[i % len(TOPICS)]} number {i * 7919}", (str(i),))
                 for i in range(60))
    config = BenchConfig(workflows=("hyde",), nprobes=(8,), offline_requests=24, rates=(),
                         concurrencies=(4,), mix=False, data=None, out=tmp_path, traffic=traffic,
                         executors=executors)
    return Workbench(config, {"hyde": workflows.hyde()}, QuestionPool(pool, pool, ()), search,
                     RuntimeConfig.of(engine="sim", concurrency=4))


def _run(bench: Workbench):
    seen: list = []
    rows = asyncio.run(run_cells(bench, lambda cell, total: seen.append))
    return rows, seen


def test_every_executor_of_a_cell_gets_the_same_zipf_requests(tmp_path: Path):
    bench = _bench(tmp_path, Traffic(1.2))
    jobs = make_jobs(bench, "hyde", None, 24, seed=5)
    assert jobs == make_jobs(bench, "hyde", None, 24, seed=5)
    questions = [r.question for r in jobs[0].requests]
    assert len(set(questions)) < len(questions)  # popular questions repeat
    assert len({r.id for r in jobs[0].requests}) == 24  # ids stay unique
    rows, seen = _run(bench)
    assert [r.executor for r in rows] == ["ragraph", "sequential", "stage-batched"]
    assert all(r.summary.errors == 0 for r in rows)
    # The executors run one after another: each one's 24 outcomes in turn.
    asked = [sorted((o.rid, o.question) for o in seen[i * 24:(i + 1) * 24]) for i in range(3)]
    assert asked[0] == asked[1] == asked[2]


def test_zipf_traffic_makes_the_top_documents_serve_more_retrievals(tmp_path: Path):
    (uniform,), _ = _run(_bench(tmp_path, UNIFORM, ("ragraph",)))
    (zipf,), _ = _run(_bench(tmp_path, Traffic(1.2), ("ragraph",)))
    assert uniform.top_docs_share is not None and zipf.top_docs_share is not None
    assert zipf.top_docs_share > uniform.top_docs_share
    # Reported in the notes beside RAGCache's measure, and in the CSV.
    note = report.popularity_note([zipf], "zipf:1.2")
    assert f"hyde offline {zipf.top_docs_share * 100:.0f}%" in note
    assert "--traffic zipf:1.2" in note and "top 3%" in note and "RAGCache measured 60%" in note
    write_csv(tmp_path / "bench.csv", [zipf], {"traffic": "zipf:1.2"})
    with (tmp_path / "bench.csv").open() as handle:
        (row,) = csv.DictReader(handle)
    assert row["traffic"] == "zipf:1.2"
    assert float(row["top_docs_share"]) == pytest.approx(zipf.top_docs_share)
