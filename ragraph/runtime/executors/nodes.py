"""Running one whole Generate or Retrieve node for one request (the baselines' unit of work)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor as ThreadPool

from ragraph.errors import WorkflowError
from ragraph.ir.nodes import Generate, Node, Retrieve
from ragraph.ir.values import Passages
from ragraph.runtime import effects
from ragraph.runtime.executors.base import Services, clock
from ragraph.runtime.generate import generated_text, generation_request
from ragraph.runtime.request import RequestState


async def run_generation(node: Generate, state: RequestState, services: Services) -> None:
    prompt = effects.generation_prompt(node, state.variables)
    request = generation_request(state.rid, node, prompt, attempt=len(state.path))
    start = clock()
    stream = services.llm.submit(request)
    async for event in stream:
        if state.first_token_at is None:
            state.first_token_at = clock()
        services.hooks.text(state.rid, node.id, node.output, event.text)
    result = await stream.result()
    end = clock()
    services.tracer.add_span(state.rid, f"generate {node.id}", start, end, engine=False)
    services.tracer.add_span("llm", f"{state.rid} {node.id}", start, end)
    text = generated_text(result)
    services.hooks.generated(state.rid, node.id, result)
    effects.apply_generation(node, state.variables, text, text.min_prob)
    services.hooks.unit_completed(state, node, start, end)


def search_blocking(services: Services, node: Retrieve, query: str) -> Passages:
    start = clock()
    passages = services.search.search(query, node.topk, node.nprobe)
    services.tracer.add_span("search", f"retrieve {node.id}", start, clock())
    return passages


async def run_retrieval(
    node: Retrieve, state: RequestState, services: Services, pool: ThreadPool
) -> None:
    query = effects.retrieval_query(node, state.variables)
    start = clock()
    loop = asyncio.get_running_loop()
    passages = await loop.run_in_executor(pool, search_blocking, services, node, query)
    end = clock()
    services.tracer.add_span(state.rid, f"retrieve {node.id}", start, end, engine=False)
    effects.apply_retrieval(node, state.variables, passages)
    state.retrievals.append(passages)
    services.hooks.unit_completed(state, node, start, end)


async def run_node(node: Node, state: RequestState, services: Services, pool: ThreadPool) -> None:
    if isinstance(node, Generate):
        await run_generation(node, state, services)
    elif isinstance(node, Retrieve):
        await run_retrieval(node, state, services, pool)
    else:
        raise WorkflowError(f"the baseline executors run source graphs; got a {node.kind} node",
                            node=node.id)
