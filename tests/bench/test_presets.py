"""Bench presets: the seeds' regime sized by memory, the quick variants, llama.cpp's."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragraph.bench.measure.machine import available_memory_bytes
from ragraph.bench.run.config import BenchConfig
from ragraph.bench.run.presets import SEEDS_RATES, llamacpp_preset, quick, seeds_preset
from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig

GIB = 2**30


def test_seeds_takes_the_largest_index_memory_allows():
    laptop = seeds_preset(BenchConfig(), 24 * GIB)
    assert laptop.scale >= 8_000_000  # the issue: at least 8M vectors on 24 GiB
    assert seeds_preset(BenchConfig(), 128 * GIB).scale == 38_000_000  # the paper's 38M
    assert (laptop.nlist, laptop.nprobes) == (4096, (128, 256, 512))
    assert laptop.workflows == ("oneshot", "hyde", "multistep", "irg", "recomp")
    assert laptop.offline_requests == 1024 and min(laptop.rates) == 4 and max(laptop.rates) == 28
    assert laptop.max_online_requests == 128 and laptop.plots
    assert laptop.concurrencies == (64, 128)  # each executor's best counts


def test_quick_seeds_is_small():
    small = seeds_preset(quick(BenchConfig()), 24 * GIB)
    assert small.quick and small.scale == 1_000_000 and small.nprobes == (128, 256)
    assert len(small.workflows) == 3 and not small.plots
    # Two of the paper's rates, the higher one past what 2-core executors sustain.
    assert set(small.rates) <= set(SEEDS_RATES) and max(small.rates) >= 16
    assert small.concurrencies == (64, 128)


def test_llamacpp_preset_compares_with_the_langgraph_app():
    config = llamacpp_preset(BenchConfig.of(engine="llamacpp"))
    assert config.executors == ("ragraph", "langgraph") and config.concurrencies == (8, 16)
    labels = [v.label for v in config.variants()]
    assert labels == ["ragraph", "ragraph, no prefix store", "langgraph"]


def test_available_memory_reads_meminfo(tmp_path: Path):
    info = tmp_path / "meminfo"
    info.write_text("MemTotal: 100 kB\nMemAvailable:   2048 kB\n")
    assert available_memory_bytes(info) == 2048 * 1024


def test_flags_given_on_the_command_line_win_over_the_preset() -> None:
    from ragraph.cli import cmd_bench
    from ragraph.cli.main import build_parser

    args = build_parser().parse_args(["bench", "--preset", "seeds", "--no-plots",
                                      "--nprobe", "128", "--requests", "256"])
    config = cmd_bench.config_from(args)
    assert not config.plots and config.nprobes == (128,) and config.offline_requests == 256
    assert cmd_bench.config_from(build_parser().parse_args(["bench", "--preset", "seeds"])).plots


def test_seeds_index_size_holds_still_while_free_memory_moves():
    """Each exact size is a new index to build (8 minutes, 14 GB): a few hundred MB more or
    less available must not change it."""
    from ragraph.bench.run.presets import SCALE_QUANTUM

    sizes = {seeds_preset(BenchConfig(), int(22.8 * GIB) + delta).scale
             for delta in range(0, 200 * 2**20, 20 * 2**20)}
    assert len(sizes) == 1 and sizes.pop() % SCALE_QUANTUM == 0


def test_the_bench_holds_the_run_settings_its_cells_share():
    """One RuntimeConfig, built once: the knobs given over a run's defaults but the engine (the
    bench's is sim); each cell adds only the swept values and the index."""
    assert BenchConfig().run == RuntimeConfig.of(engine="sim")
    config = BenchConfig.of(engine="llamacpp", passes="-O0", gen_threads=1, concurrencies=(8,))
    runtime = config.runtime("/tmp/bench-index")
    assert (runtime.llm.engine, runtime.llm.gen_threads, runtime.scheduler.passes) == (
        "llamacpp", 1, "-O0")
    assert (runtime.scheduler.concurrency, runtime.search.index) == (8, "/tmp/bench-index")
    assert runtime == config.run.with_knobs(concurrency=8, nprobe=32, index="/tmp/bench-index")
    with pytest.raises(ConfigError, match="^--gen-threads: must be at most"):
        BenchConfig.of(gen_threads=100_000)  # named as the bench's flag


def test_a_window_asked_for_is_run_whole_past_the_presets_request_cap() -> None:
    from ragraph.bench.run.session import online_requests
    from ragraph.cli import cmd_bench
    from ragraph.cli.main import build_parser

    def config(*flags: str) -> BenchConfig:
        return cmd_bench.config_from(build_parser().parse_args(
            ["bench", "--preset", "seeds", "--quick", "--rates", "14", *flags]))

    # The seeds preset caps its own 16 s windows at 128 requests; 20 s at 14 req/s is 280.
    assert online_requests(config(), 14.0) == 128
    assert online_requests(config("--window", "20"), 14.0) == 280
