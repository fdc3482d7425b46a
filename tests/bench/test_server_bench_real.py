"""The bench on a real llama.cpp `llama-server` (slow; `make llama-server` builds it): ragraph,
the LangGraph app's openai client and the server alone on the same server, each run on emptied
slots and measured by the server's own counters; a server with a RAM prompt cache is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragraph.bench.data.index import IndexSpec, ensure_bench_index
from ragraph.bench.data.questions import load_questions
from ragraph.bench.run.config import BenchConfig
from ragraph.bench.run.driver import check_server
from ragraph.bench.run.session import Workbench, run_cells
from ragraph.bench.server.alone import LABEL
from ragraph.errors import ConfigError
from ragraph.runtime.llm.llamacpp.engine import default_model_path
from ragraph.runtime.retrieval.manifest import load_index
from ragraph.runtime.search_service import SearchService
from tests.llm.conftest import running_cpp_server
from tests.runtime import workflows
from tests.runtime.fakes import HashEmbedder

from .helpers import toy_base

pytestmark = pytest.mark.slow


def test_the_bench_measures_both_clients_and_the_server_alone_on_a_llama_server(
        tmp_path: Path) -> None:
    flags = ("--slot-save-path", str(tmp_path / "slots"), "--cache-ram", "0")
    (tmp_path / "slots").mkdir()
    with running_cpp_server(default_model_path(), tmp_path / "server.log", slots=4,
                            extra=flags) as (_, url):
        config = BenchConfig.of(engine="openai", url=url, workflows=("hyde",),
                             executors=("ragraph", "langgraph"), nprobes=(8,), offline_requests=4,
                             rates=(), concurrencies=(2,), mix=False, data=None, out=tmp_path)
        assert any("empty slots" in note for note in check_server(config))
        info = ensure_bench_index(tmp_path / "cache", toy_base(300), IndexSpec(scale=0))
        loaded = load_index(Path(info.directory))
        search = SearchService(loaded.engine, HashEmbedder(), loaded.store, nprobe=8)
        bench = Workbench(config, {"hyde": workflows.hyde()}, load_questions(None), search,
                          config.runtime(info.directory))
        rows = asyncio.run(run_cells(bench, lambda cell, total: lambda *_: None))
    assert [r.executor for r in rows] == ["ragraph", "langgraph", LABEL]
    assert all(r.summary.errors == 0 and r.summary.requests == 4
               and r.summary.throughput_rps > 0 for r in rows)
    # The server's own counters: a run on emptied slots computes its prompts (nothing left over
    # from the run before), and decodes in batches.
    assert all(r.llm.llm_tokens > r.llm.completion_tokens > 0 for r in rows)
    assert all(r.server_batch is not None and r.server_batch >= 1 for r in rows)
    ours, app, alone = rows
    # The replay sends the app's calls: the same prompts, so the same prompt tokens (which of
    # them a slot's cache serves depends on which slot each call lands in).
    def prompt_tokens(r):  # noqa: ANN001, ANN202
        return r.llm.prompt_tokens + r.llm.cached_tokens

    assert prompt_tokens(alone) == prompt_tokens(app)
    assert ours.agree is None and app.agree is not None and alone.agree is None
    # Bounds (issue 31): the server's work by its counters, priced at its rates probed on the
    # wall clock (a server keeps no timers a client reads); on this host it shares the cores.
    priced = [r.bound for r in rows]
    assert all(b is not None and b.llm_s > 0 and b.total_s > 0 for b in priced)
    assert priced[0].rates.llm.timed_by == "wall clock" and priced[0].rates.shares_cores
    assert ours.queries_embedded > 0 and alone.queries_embedded == 0


def test_a_llama_server_with_a_ram_prompt_cache_is_refused(tmp_path: Path) -> None:
    (tmp_path / "slots").mkdir()
    flags = ("--slot-save-path", str(tmp_path / "slots"))  # --cache-ram left at its 8 GiB
    with running_cpp_server(default_model_path(), tmp_path / "server.log", slots=2,
                            extra=flags) as (_, url):
        with pytest.raises(ConfigError, match="--cache-ram 0"):
            check_server(BenchConfig.of(engine="openai", url=url, data=None, out=tmp_path))
