"""The run's configuration is one tree of parts, each knob in one part under one name, each
check in one place, and each component built from its own part."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.config import PARTS, TOP_LEVEL, RuntimeConfig, knobs
from ragraph.runtime.distributed.options import ScaleConfig
from ragraph.runtime.llm.llamacpp.engine import LlamaCppConfig
from ragraph.runtime.llm.settings import LlmConfig

RUNTIME = Path(__file__).resolve().parents[2] / "ragraph" / "runtime"


def test_every_knob_has_one_part_and_one_name() -> None:
    names = [f.name for part in PARTS.values() for f in fields(part)] + list(TOP_LEVEL)
    assert len(names) == len(set(names)) == len(knobs())


def test_flat_knobs_land_in_their_parts() -> None:
    config = RuntimeConfig.of(engine="sim", nprobe=64, concurrency=3, shard_cpus=0.5,
                              otlp="http://127.0.0.1:4318")
    assert config.llm.engine == "sim" and config.search.nprobe == 64
    assert config.scheduler.concurrency == 3 and config.scale.shard_cpus == 0.5
    assert config.otlp == "http://127.0.0.1:4318"
    changed = config.with_knobs(executor="sequential", prefix_reuse=False)
    assert (changed.scheduler.executor, changed.llm.prefix_reuse) == ("sequential", False)
    assert changed.search == config.search and changed.scheduler.concurrency == 3
    with pytest.raises(ConfigError, match="^concurency: not a runtime option"):
        RuntimeConfig.of(concurency=3)


def test_a_knob_is_checked_once_with_the_same_message_wherever_it_is_given() -> None:
    with pytest.raises(ConfigError) as direct:
        ScaleConfig(shards=0)
    with pytest.raises(ConfigError) as through_the_tree:
        RuntimeConfig.of(shards=0)
    assert str(direct.value) == str(through_the_tree.value) == (
        "shards: must be a positive integer, got 0")
    pool = (RUNTIME / "distributed" / "shard_pool.py").read_text()
    assert "ConfigError" not in pool  # the shard pool takes the checked part as it is


def test_engines_are_built_from_the_llm_part_alone() -> None:
    for module in sorted((RUNTIME / "llm").glob("*.py")):
        assert "ragraph.runtime.config " not in module.read_text().replace(
            "ragraph.runtime.config\n", "ragraph.runtime.config \n"), module.name
    batched = LlamaCppConfig.of(LlmConfig(gen_threads=2), in_flight=8)
    assert (batched.max_running, batched.prefix_slots, batched.n_threads) == (16, 16, 2)
    exact = LlamaCppConfig.of(LlmConfig(exact=True), in_flight=8)
    assert (exact.max_running, exact.prefix_slots) == (1, 0)


def test_thread_defaults_follow_the_engine_of_the_tree(host) -> None:
    from ragraph.runtime.threads import CoreSplit

    # Beside a GPU engine search takes the host's cores up to 8; llama.cpp takes them all.
    assert RuntimeConfig.of(engine="sim").split == CoreSplit(gen=1, search=min(host.cores, 8))
    assert RuntimeConfig.of(engine="llamacpp").split == CoreSplit(
        gen=host.cores, search=max(1, host.cores // 8))
    assert RuntimeConfig.of(engine="sim", search_threads=3).search.search_threads == 3


def test_beside_a_gpu_engine_search_takes_every_core_up_to_eight() -> None:
    # On a 16-core machine the search thread on all 16 served 1.4-1.6x fewer requests than on
    # 4 or 8 (docs/benchmarks/code-figures.md#cores).
    from ragraph.runtime.threads import CoreSplit, default_split

    assert default_split("sim", cores=2) == CoreSplit(gen=1, search=2)
    assert default_split("sim", cores=16) == CoreSplit(gen=1, search=8)
    assert default_split("openai", cores=64).search == 8
    assert default_split("llamacpp", cores=16) == CoreSplit(gen=16, search=2)


def test_knobs_set_into_a_file_tree_land_in_their_tables() -> None:
    from ragraph.runtime.config import tree_with

    base = {"llm": {"engine": "sim"}, "scheduler": {"concurrency": 4}}
    tree = tree_with(base, {"concurrency": 16, "nprobe": 64, "otlp": "http://127.0.0.1:4318"})
    assert tree == {"llm": {"engine": "sim"}, "scheduler": {"concurrency": 16},
                    "search": {"nprobe": 64}, "otlp": "http://127.0.0.1:4318"}
    assert base["scheduler"] == {"concurrency": 4}  # a copy: the file's tree is left as read


def test_the_hot_cache_sizes_itself_from_the_search_part() -> None:
    from ragraph.runtime.retrieval.settings import SearchConfig
    from ragraph.runtime.retrieval.tier.hotcache import HotCacheConfig

    tier = HotCacheConfig.of(SearchConfig(hot_cache=True, hot_fraction=0.2), nlist=100)
    assert (tier.capacity, tier.prefetch_capacity) == (18, 2)  # 20 clusters, an eighth to prefetch
    assert HotCacheConfig.of(SearchConfig(hot_fraction=0.001), nlist=100).capacity == 1
