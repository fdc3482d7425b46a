"""`ragraph calibrate` end to end on the CPU with a tiny shape: it measures every grid point, writes
a profile file the simulated engine then runs on, and refuses what a CPU cannot measure."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from ragraph.bench.measure.calibrate import Calibration, CalibrationGrid, calibrate
from ragraph.cli.main import main
from ragraph.errors import ConfigError
from ragraph.ir import Sampling
from ragraph.runtime.llm import GenerationRequest
from ragraph.runtime.llm.sim.clock import VirtualClock
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine
from ragraph.runtime.llm.sim.profile import load_profile
from ragraph.runtime.llm.sim.profiled import ProfiledCostModel, cost_model_for
from ragraph.runtime.llm.sim.shape import TINY

GRID = CalibrationGrid(prefill=(8, 32), batches=(1, 4), contexts=(16, 64), reps=1, warmup=0)


def test_tiny_shape_on_the_cpu_measures_every_point() -> None:
    lines: list[str] = []
    profile = calibrate(Calibration(TINY, "cpu", GRID, name="tiny"), lines.append)
    assert [p.tokens for p in profile.prefill] == [8, 32]
    assert [(p.batch, p.context) for p in profile.decode] == [(1, 16), (1, 64), (4, 16), (4, 64)]
    assert all(p.measured and p.ms > 0 for p in (*profile.prefill, *profile.decode))
    assert profile.gpu.startswith("CPU") and profile.dtype == "float32"
    assert profile.shape.layers == TINY.layers and profile.shape.dtype_bytes == 4
    assert len(lines) == 6 and "roofline" in lines[0]
    model = ProfiledCostModel(profile)
    assert model.decode_step_s(4, 4 * 64) == profile.decode[-1].ms / 1e3


def test_decode_points_over_the_kv_budget_are_skipped_and_named() -> None:
    grid = CalibrationGrid(prefill=(8,), batches=(1, 4), contexts=(16,), reps=1, warmup=0,
                           max_kv_tokens=40)
    profile = calibrate(Calibration(TINY, "cpu", grid))
    assert [(p.batch, p.context) for p in profile.decode] == [(1, 16)]
    assert "batch 4 x context 16" in profile.note


def test_cli_writes_a_profile_the_sim_engine_runs_on(tmp_path: Path) -> None:
    out = tmp_path / "tiny-cpu.json"
    assert main(["calibrate", "--device", "cpu", "--shape", "tiny", "--out", str(out),
                 "--prefill", "8,32", "--batches", "1,2", "--contexts", "16", "--reps", "1",
                 "--warmup", "0"]) == 0
    profile = load_profile(out)
    assert profile.name == "tiny-cpu" and len(profile.prefill) == 2 and len(profile.decode) == 2
    cost = cost_model_for(str(out))

    async def run() -> str:
        async with SimEngine(SimConfig(cost=cost, output_lengths=(3,)), VirtualClock()) as eng:
            stream = eng.submit(GenerationRequest("a", prompt_ids=tuple(range(1, 33)),
                                                  params=Sampling(max_tokens=3)))
            assert (await stream.result()).simulated
            return eng.name

    assert "profile tiny-cpu" in asyncio.run(run())


def test_a_full_size_model_is_refused_on_the_cpu(capsys) -> None:
    with pytest.raises(ConfigError, match="--shape.*measure it on a GPU"):
        Calibration(replace(TINY, hidden=4096, vocab=128256), "cpu")
    code = main(["calibrate", "--device", "cpu", "--out", "/nonexistent/x.json"])
    assert code == 2 and "--shape tiny" in capsys.readouterr().err


def test_bad_grid_values_name_the_flag() -> None:
    with pytest.raises(ConfigError, match="--batches"):
        CalibrationGrid(batches=(0, 1))
    assert main(["calibrate", "--device", "cpu", "--shape", "tiny", "--prefill", "8,x"]) == 2
