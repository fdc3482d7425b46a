"""A server with the workflows of `workflows/` on the simulated engine over real faiss, shared by a
module's tests, and the answers `ragraph run` gives to the same requests (its `execute`, on the
same engine and settings) to compare with."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragraph.api.load import compile_catalog
from ragraph.dsl import load
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.events import GenerationUsage
from ragraph.runtime.outcome import Outcome
from ragraph.runtime.request import Request
from tests.serve.servers import Served, serving

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
NAMES = ("oneshot", "hyde", "irg", "multistep")
SIM = RuntimeConfig.of(engine="sim", concurrency=16, search_threads=1, nprobe=16)
TOPICS = ("the Eiffel Tower", "photosynthesis", "Ada Lovelace", "the Nile", "jazz", "Mars",
          "the violin", "glaciers", "chess", "the moon landing")


def graphs(names: Sequence[str] = NAMES) -> dict:
    return {name: load(WORKFLOWS / f"{name}.rag") for name in names}


def question(i: int) -> str:
    return f"What is notable about {TOPICS[i % len(TOPICS)]} ({i})?"


@dataclass(frozen=True)
class Expected:
    outcome: Outcome
    prompt_tokens: int  # over every generation the request ran
    completion_tokens: int

    @property
    def answer(self) -> str | None:
        return self.outcome.answer


class _Usage:
    """A run observer that sums each request's generations."""

    def __init__(self) -> None:
        self.tokens: dict[str, tuple[int, int]] = {}

    def emit(self, event) -> None:  # noqa: ANN001
        if isinstance(event, GenerationUsage):
            p, c = self.tokens.get(event.rid, (0, 0))
            self.tokens[event.rid] = (p + event.prompt_tokens, c + event.completion_tokens)


def reference(asks: Sequence[tuple[str, str]], config: RuntimeConfig = SIM) -> dict:
    """{(workflow, question): Expected} as `ragraph run` computes them: `execute` on engines
    opened the same way, with the same compiled workflows and settings."""
    from ragraph.runtime.app import execute, open_services
    from tests.runtime.fakes import random_search

    unique = sorted(set(asks))
    requests = [Request(id=f"r{i}", question=q, workflow=w) for i, (w, q) in enumerate(unique)]
    usage = _Usage()

    async def run():
        catalog = compile_catalog(graphs(sorted({w for w, _ in unique})), config.scheduler.passes)
        async with open_services(config, random_search()) as services:
            services.hooks.observer = usage
            return await execute(catalog, requests, config, services)

    by_id = {o.rid: o for o in asyncio.run(run()).outcomes}
    return {(r.workflow, r.question): Expected(by_id[r.id], *usage.tokens.get(r.id, (0, 0)))
            for r in requests}


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with serving(graphs(), SIM) as served:
        yield served
