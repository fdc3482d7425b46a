"""Engine replicas on real llama.cpp servers: two `llama_cpp.server` processes behind the replica
router; one is killed mid-run and every request still gets the answer it gets without faults."""

from __future__ import annotations

import asyncio

from ragraph.api.load import compile_catalog
from ragraph.runtime.app import execute
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.distributed.replicas import ReplicaRouter
from ragraph.runtime.executors.base import Services
from ragraph.runtime.llm.http.openai import OpenAIHttpConfig, OpenAIHttpEngine
from ragraph.runtime.request import Request
from tests.llm.conftest import running_server
from tests.runtime import fakes
from tests.workflows.test_workflows import load

QUESTIONS = [f"What is notable about topic {i}?" for i in range(6)]


def answer_all(urls: list[str], on_done=None) -> tuple[dict[str, str], ReplicaRouter]:
    router = ReplicaRouter([OpenAIHttpEngine(OpenAIHttpConfig(base_url=u, name=f"llama {u}"))
                            for u in urls])

    async def go():
        config = RuntimeConfig.of(engine="sim", executor="ragraph", concurrency=4)
        async with router:
            services = Services(llm=router, search=fakes.random_search())
            requests = [Request(id=f"q{i}", question=q) for i, q in enumerate(QUESTIONS)]
            return await execute(compile_catalog(load("oneshot"), config.scheduler.passes),
                                 requests, config, services, on_done)

    result = asyncio.run(go())
    assert all(o.error is None for o in result.outcomes), [o.error for o in result.outcomes]
    return {o.rid: o.answer for o in result.outcomes}, router


def test_a_replica_killed_mid_run_fails_over_and_changes_no_answer(model_path, tmp_path):
    with running_server(model_path, tmp_path / "a.log", threads=1) as (_, a), \
            running_server(model_path, tmp_path / "b.log", threads=1) as (b_proc, b):
        want, _ = answer_all([a])
        done = []

        def kill_b_after_the_first(outcome) -> None:
            done.append(outcome)
            if len(done) == 1:
                b_proc.kill()

        got, router = answer_all([a, b], kill_b_after_the_first)
    assert got == want
    assert router.faults(), "the killed replica's requests were retried"
    assert all(f.who.startswith("replica 1") for f in router.faults())
    assert router.routed[1] > 0 and b_proc.poll() is not None
