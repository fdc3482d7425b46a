"""The release and the simulated engine's token budget as tune's speed knobs: searched where
they can pay (the release where the engine batches on its own, the budget on the sim engine
only), predicted and ordered like passes and concurrency, set in each measured run, read back
from results files written before them, and carried by the tuned configuration."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

from ragraph.cli.cmd_tune import older_note
from ragraph.dsl import load
from ragraph.runtime.llm.settings import LlmConfig
from ragraph.tune.front import front, low_p95, throughput
from ragraph.tune.measure import Measurement
from ragraph.tune.results import Results
from ragraph.tune.search import search, speed_order
from ragraph.tune.space import Point, Space, Speed, Unsearched, shipped, space_for

from .surface import Counting, surface
from .test_cli import WORKFLOWS

# The surface's quality knobs, fewer of them, with the sim engine's speed knobs.
SIM = Space(nprobe=(4, 16, 32), topk=(2, 5), rounds=(1, 2), passes=("-O0", "-O2"),
            concurrency=(2, 8), release=("step", "retrieval"), budget=(2048, 8192))


def _space(engine: str, quick: bool, **llm: object) -> Space:
    url = {"url": "http://127.0.0.1:1"} if engine == "openai" else {}
    return space_for(load(WORKFLOWS / "hyde.rag"), quick, 32, LlmConfig(engine=engine, **url,
                                                                         **llm))


def test_the_release_is_searched_where_the_engine_batches_on_its_own_and_the_budget_on_sim():
    quick, full = _space("sim", True), _space("sim", False)
    assert (quick.release, quick.budget) == (("step", "retrieval"), (2048, 8192))
    assert (full.release, full.budget) == (("step", "retrieval", "auto"), (512, 2048, 8192))
    assert quick.reference == Speed("-O2", 8, "step", 8192)
    assert len(quick.speed_settings()) == 2 * 2 * 2 * 2
    assert _space("sim", True, sim_budget=4096).budget == (1024, 4096)  # the run's own on top
    server = _space("openai", True)
    assert (server.release, server.budget) == (("step", "retrieval"), (None,))
    # llama.cpp forms its batches on this machine's cores: neither knob is searched there.
    for space in (_space("llamacpp", True), _space("llamacpp", False),
                  space_for(load(WORKFLOWS / "hyde.rag"), True)):
        assert (space.release, space.budget) == (("step",), (None,))
        assert {(s.release, s.budget) for s in space.speed_settings()} == {("step", None)}


def test_a_point_names_its_release_and_budget_and_the_default_is_the_runs():
    point = Point(8, 2, None, "-O2", 8, release="retrieval", budget=2048)
    assert point.key.endswith("concurrency=8 release=retrieval budget=2048")
    assert Point(8, 2, None, "-O2", 8).key.endswith("concurrency=8 release=step")
    assert Point.from_json(point.to_json()) == point
    assert SIM.point((8, 2, None, 1.0), ("-O0", 2)).speed == Speed("-O0", 2, "step", None)
    hyde = load(WORKFLOWS / "hyde.rag")
    assert shipped(hyde, 32, "-O2", 8, "step", 8192) == \
        Point(32, 5, None, "-O2", 8, release="step", budget=8192)


def test_the_speed_settings_nearest_the_reference_go_first():
    order = speed_order(SIM)
    assert SIM.reference not in order and len(order) == len(SIM.speed_settings()) - 1
    assert order[:4] == [Speed("-O2", 2, "step", 8192), Speed("-O2", 2, "step", 2048),
                         Speed("-O2", 8, "step", 2048), Speed("-O2", 2, "retrieval", 8192)]
    assert all(s.passes == "-O0" for s in order[7:])


def sped(p: Point) -> Measurement:
    """The surface, with the release and the budget changing speed alone (separably)."""
    m = surface(p)
    gain = (1.2 if p.release == "retrieval" else 1.0) * (0.9 if p.budget == 2048 else 1.0)
    return replace(m, throughput_rps=m.throughput_rps * gain, p95_s=m.p95_s / gain)


class Sped(Counting):
    async def __call__(self, point: Point) -> Measurement:
        self.calls.append(point.key)
        return sped(point)


def test_the_speed_model_and_the_search_take_the_new_knobs():
    measure = Sped()
    searched = asyncio.run(search(SIM, measure, Results(None, "c"), lambda step: None))
    every = [sped(SIM.point(q, s)) for q in SIM.quality_settings() for s in SIM.speed_settings()]
    for speed in (throughput, low_p95):
        assert {m.point for m in front(searched.measured, speed)} == \
               {m.point for m in front(every, speed)}
    predicted = [m for m in searched.measured if m.predicted is not None]
    assert {m.point.release for m in predicted} == {"step", "retrieval"}
    assert {m.point.budget for m in predicted} == {2048, 8192}
    for m in predicted:  # separable: the nearest setting's effect carries over exactly
        assert abs(m.predicted.error(m.throughput_rps)) < 1e-9
    assert searched.by_model > 0  # budget 2048 is slower everywhere: predicted out
    assert len(measure.calls) == len(set(measure.calls)) == len(every) - searched.pruned


def _old_line(line: str) -> str:
    """A results line as tune wrote it before the release and the budget were searched."""
    raw = json.loads(line)
    del raw["point"]["release"], raw["point"]["budget"]
    return json.dumps(raw) + "\n"


def test_an_old_results_file_reads_as_step_at_the_runs_budget_and_resumes(tmp_path: Path):
    path = tmp_path / "old.jsonl"
    old_space = replace(SIM, release=("step",), budget=(8192,))
    asyncio.run(search(old_space, Counting(), Results.open(path, "ctx"), lambda step: None))
    assert Results.open(path, "ctx").older == 0  # lines that say their release
    path.write_text("".join(_old_line(line) for line in path.read_text().splitlines()))
    assert '"release"' not in path.read_text()
    results = Results.open(path, "ctx", before=Unsearched("step", 8192))
    assert results.older == len(results.measured) > 0  # counted, for tune's note
    assert "measured before tune searched the release; read as run at release step and " \
        "budget 8192" in older_note(results.older, path, Unsearched("step", 8192))
    assert results.measured and all(m.point.release == "step" and m.point.budget == 8192
                                    for m in results.measured.values())
    old, again = set(results.measured), Counting()
    searched = asyncio.run(search(SIM, again, results, lambda step: None))
    assert not set(again.calls) & old  # no old point measured again
    assert all("release=retrieval" in key or "budget=2048" in key for key in again.calls)
    assert len(searched.measured) == len(old) + len(again.calls)
    # A run given --release retrieval had run its old points at it.
    line = json.loads(path.read_text().splitlines()[0])["point"]
    assert Point.from_json(line, Unsearched("retrieval", 2048)).speed[2:] == ("retrieval", 2048)


def test_a_measured_point_runs_with_its_release_and_budget(monkeypatch):
    from ragraph.bench.run import cells
    from ragraph.runtime.config import RuntimeConfig
    from ragraph.runtime.request import Request
    from ragraph.tune.measure import BenchMeasure
    from tests.runtime.fakes import random_search

    ran = []
    real = cells._run_executor

    async def spy(cell, jobs, config, search, on_done):  # noqa: ANN001, ANN202
        ran.append(config)
        return await real(cell, jobs, config, search, on_done)

    monkeypatch.setattr(cells, "_run_executor", spy)
    requests = (Request(id="q0", question="Who wrote Hamlet?", golden_answers=["Shakespeare"]),)
    measure = BenchMeasure(load(WORKFLOWS / "hyde.rag"), requests,
                           RuntimeConfig.of(engine="sim"), random_search())
    point = Point(8, 2, None, "-O0", 2, release="retrieval", budget=2048)
    measured = asyncio.run(measure(point))
    [config] = ran
    assert (config.scheduler.release, config.llm.sim_budget) == ("retrieval", 2048)
    assert (config.scheduler.passes, config.scheduler.concurrency) == ("-O0", 2)
    assert measured.point == point and measured.errors == 0
