"""Running one whole Generate, Retrieve or Merge node for one request (the baselines' unit of
work). A map runs its branches through `fan`: one after another, as an application's loop does
(`one_after_another`), or all submitted at once so the engine batches them (`all_at_once`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor as ThreadPool
from typing import Any

from ragraph.errors import WorkflowError
from ragraph.ir.nodes import Generate, Merge, Node, Retrieve
from ragraph.ir.values import GeneratedText, Passages
from ragraph.runtime import effects
from ragraph.runtime.events import Searched
from ragraph.runtime.executors.base import Services, clock
from ragraph.runtime.generate import generated_text, generation_request
from ragraph.runtime.llm.chat import Prompt
from ragraph.runtime.llm.failure import error_of
from ragraph.runtime.request import RequestState

Thunk = Callable[[], Awaitable[Any]]
Fan = Callable[[Sequence[Thunk]], Awaitable[list]]


async def one_after_another(thunks: Sequence[Thunk]) -> list:
    return [await thunk() for thunk in thunks]


async def all_at_once(thunks: Sequence[Thunk]) -> list:
    return list(await asyncio.gather(*(thunk() for thunk in thunks)))


async def _generate(node: Generate, state: RequestState, services: Services, prompt: Prompt,
                    branch: int | None = None) -> GeneratedText:
    request = generation_request(state.rid, node, prompt, attempt=len(state.path), branch=branch)
    start = clock()
    stream = services.llm.submit(request)
    while (event := await stream.next_event()) is not None:
        if state.first_token_at is None:
            state.first_token_at = clock()
        if branch is None:  # a branch's text is one item of a list, not the output's text
            services.hooks.text(state.rid, node.id, node.output, event.text)
    result = await stream.result(raise_on_error=False)
    end = clock()
    label = node.id if branch is None else f"{node.id}[{branch}]"
    services.tracer.add_span(state.name, f"generate {label}", start, end, engine=False)
    services.tracer.add_span("llm", f"{state.name} {label}", start, end)
    error = error_of(result, f"node {label!r}")  # typed: whose fault it was
    if error is not None:
        raise error
    text = generated_text(result)
    services.hooks.generated(state.rid, node.id, result, prompt)
    return text


async def run_generation(node: Generate, state: RequestState, services: Services,
                         fan: Fan = one_after_another) -> None:
    start = clock()
    if not node.each:
        prompt = effects.generation_prompt(node, state.variables)
        text = await _generate(node, state, services, prompt)
        effects.apply_generation(node, state.variables, text, text.min_prob)
    else:
        prompts = [effects.generation_prompt(node, v)
                   for v in effects.branches(node.each, state.variables, node.id)]
        texts = await fan([_thunk(_generate, node, state, services, p, i)
                           for i, p in enumerate(prompts)])
        effects.apply_branches_to(node.output, state.variables,
                                  [effects.generated_value(t) for t in texts])
    services.hooks.unit_completed(state, node, start, clock())


def _thunk(fn: Callable[..., Awaitable[Any]], *args: Any) -> Thunk:
    return lambda: fn(*args)


def search_blocking(services: Services, node: Retrieve, query: str) -> Passages:
    start = clock()
    passages = services.search.search(query, node.topk, node.nprobe)
    services.tracer.add_span("search", f"retrieve {node.id}", start, clock())
    return passages


def whole_search(services: Services, node: Retrieve, query: str, passages: Passages) -> Searched:
    """A retrieval the baselines searched in one step over its whole probe list."""
    nprobe = min(node.nprobe or services.search.nprobe, services.search.engine.nlist)
    return Searched(query, nprobe, steps=1, clusters=nprobe, passages=passages)


async def run_retrieval(
    node: Retrieve, state: RequestState, services: Services, pool: ThreadPool
) -> None:
    """A map searches its branches one after another, as an application's loop does."""
    start = clock()
    loop = asyncio.get_running_loop()
    if not node.each:
        query = effects.retrieval_query(node, state.variables)
        passages = await loop.run_in_executor(pool, search_blocking, services, node, query)
        effects.apply_retrieval(node, state.variables, passages)
        services.hooks.retrieved(state.rid, node.id,
                                 lambda: whole_search(services, node, query, passages))
    else:
        found = [await loop.run_in_executor(pool, search_blocking, services, node,
                                            effects.retrieval_query(node, v))
                 for v in effects.branches(node.each, state.variables, node.id)]
        effects.apply_branches_to(node.output, state.variables, found)
    end = clock()
    services.tracer.add_span(state.name, f"retrieve {node.id}", start, end, engine=False)
    state.retrievals.extend(effects.retrieved(state.variables[node.output]))
    services.hooks.unit_completed(state, node, start, end)


def run_merge(node: Merge, state: RequestState, services: Services) -> None:
    start = clock()
    effects.apply_merge(node, state.variables)
    state.retrievals.extend(effects.retrieved(state.variables[node.output]))
    services.hooks.unit_completed(state, node, start, clock())


async def run_node(node: Node, state: RequestState, services: Services, pool: ThreadPool) -> None:
    if isinstance(node, Generate):
        await run_generation(node, state, services)
    elif isinstance(node, Retrieve):
        await run_retrieval(node, state, services, pool)
    elif isinstance(node, Merge):
        run_merge(node, state, services)
    else:
        raise WorkflowError(f"the baseline executors run source graphs; got a {node.kind} node",
                            node=node.id)
