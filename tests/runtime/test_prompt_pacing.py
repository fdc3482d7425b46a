"""On an engine that batches on its own, prompts whose requests search no more are paced while a
generation on the critical path (one whose request searches next) decodes: released together,
they made one long prompt pass that every decoding sequence waited out
(`policies.leaves_to_release`). Answers are the same either way."""

from __future__ import annotations

import asyncio

import pytest

from ragraph.api.load import compile_catalog
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.sim.engine import SimConfig, SimEngine
from ragraph.runtime.request import Request
from ragraph.runtime.scheduler import policies
from tests.runtime import fakes

pytestmark = pytest.mark.usefixtures("host")

# Answer prompts far longer than the prompt tokens a decode step absorbs, hypotheses long and of
# spread lengths, so that early answers are ready while later hypotheses still decode.
LONG = " ".join(f"word{i}" for i in range(1500))
# The default simulated GPU (milliseconds a step), so searches finish while hypotheses decode.
CONFIG = SimConfig(mean_output_tokens=24)


def hyde_long() -> RAGraph:
    g = RAGraph("hyde-long")
    g.add_input("question")
    g.add_generation("hypo", prompt="Passage for: {question}\nPassage:", output="passage",
                     max_tokens=48)
    g.add_retrieval("search", topk=3, query="{question} {passage}", output="docs")
    # The question first: no two answer prompts share a prefix the engine could reuse.
    g.add_generation("answer", prompt="{question}\n" + LONG + "\n{docs}\nAnswer:",
                     output="answer", max_tokens=8)
    for a, b in ((START, "hypo"), ("hypo", "search"), ("search", "answer"), ("answer", END)):
        g.add_edge(a, b)
    return g


class StepLog(SimEngine):
    """Writes down, for each step, the generations whose prompts it starts and those it decodes."""

    def __init__(self) -> None:
        super().__init__(CONFIG)
        self.steps: list[tuple[list[str], list[str]]] = []

    def _plan(self, start):  # noqa: ANN001, ANN202 - SimEngine's own signature
        plan = super()._plan(start)
        admitted = plan.chunks[len(plan.chunks) - plan.admitted:] if plan.admitted else ()
        started = [origin(s) for s, _ in admitted]
        self.steps.append((started, [origin(s) for s in plan.decodes]))
        return plan


def origin(seq) -> str:  # noqa: ANN001 - a simulated sequence; its rid is rid/origin/key
    return seq.request.rid.split("/")[1]


def run(executor: str) -> tuple[dict[str, str], list[tuple[list[str], list[str]]]]:
    requests = [Request(id=f"q{i}", question=f"question number {i}") for i in range(32)]

    async def go():
        config = RuntimeConfig.of(engine="sim", passes="-O0", concurrency=32, executor=executor)
        async with StepLog() as engine:
            result = await execute(compile_catalog(hyde_long(), config.scheduler.passes),
                                   requests, config, Services(llm=engine,
                                                              search=fakes.random_search()))
            return result, engine.steps

    result, steps = asyncio.run(go())
    assert not any(o.error for o in result.outcomes)
    return {o.rid: o.answer for o in result.outcomes}, steps


def answers_started_beside_hypotheses(steps: list[tuple[list[str], list[str]]]) -> list[int]:
    return [started.count("answer") for started, decoding in steps if "hypo" in decoding]


def test_answers_go_in_one_at_a_time_while_hypotheses_decode():
    answers, steps = run("ragraph")
    beside = answers_started_beside_hypotheses(steps)
    assert sum(beside) > 0  # the shape does put answers beside decoding hypotheses
    assert max(beside) == 1
    assert answers == run("sequential")[0]


def test_without_pacing_answers_go_in_together(monkeypatch):
    """The test above fails without the pacing: the same run admits answers in bunches."""
    monkeypatch.setattr(policies, "leaves_to_release", lambda _c, _f, _p, sizes: len(sizes))
    answers, steps = run("ragraph")
    assert max(answers_started_beside_hypotheses(steps)) > 1
    assert answers == run("sequential")[0]
