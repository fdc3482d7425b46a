"""One serial llama.cpp engine and its reference answers for the whole session
(`serial_llamacpp.py`): the reference of a workflow is computed once, however many tests compare
with it (the executors' exactness test and the LangGraph app's, which recomputed it for every
workflow before)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.runtime import fakes
from tests.runtime.serial_llamacpp import (
    CAP_TOKENS,
    QUESTIONS,
    Capped,
    Replayed,
    answers,
    open_engine,
)

Answers = dict[str, tuple[str, tuple[str, ...]]]


@pytest.fixture(scope="session")
def llamacpp_loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="session")
def serial_llamacpp(llamacpp_loop) -> Iterator[Replayed]:  # noqa: ANN001
    """The embedded default model, batch-invariant (one running sequence, no retained KV), each
    generation it completed replayed to an identical request (`Replayed`)."""
    engine = open_engine(max_running=1, prefix_slots=0)
    llamacpp_loop.run_until_complete(engine.start())
    yield Replayed(Capped(engine, CAP_TOKENS))
    llamacpp_loop.run_until_complete(engine.close())


@pytest.fixture(scope="session")
def serial_search():
    return fakes.random_search()


@pytest.fixture(scope="session")
def serial_reference(llamacpp_loop, serial_llamacpp, serial_search  # noqa: ANN001
                     ) -> Callable[[Path, int], Answers]:
    """`reference(workflow_path, n)`: the answers and paths of `sequential -O0` on the serial
    engine for the first `n` questions, computed once a workflow for all of `QUESTIONS` (each
    request's answer is its own on this engine, whatever runs beside it)."""
    from ragraph.dsl import load

    computed: dict[Path, Answers] = {}

    def reference(path: Path, n: int) -> Answers:
        if path not in computed:
            computed[path] = answers(llamacpp_loop, serial_llamacpp, serial_search, load(path),
                                     "sequential", "-O0", len(QUESTIONS))
        return {f"q{i}": computed[path][f"q{i}"] for i in range(n)}

    return reference
