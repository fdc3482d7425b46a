"""The base interpreter (`program.interpret`) on the run's engines: what the baselines run, one
request at a time through the program of the workflow as written (`source_program`), as an
application's own loop does. A map runs its branches through `fan`: one after another
(`one_after_another`, the default) or all submitted at once so the engine batches them
(`all_at_once`, stage-batched); its searches one after another."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Executor as ThreadPool
from typing import Any

from ragraph.ir.nodes import Merge, Retrieve
from ragraph.ir.values import GeneratedText, Passages
from ragraph.program.interpret import Interpreter, Thunk, one_after_another
from ragraph.program.program import GenerationChain, Program, RetrievalChain, Unit
from ragraph.runtime import effects
from ragraph.runtime.events import Searched
from ragraph.runtime.executors.base import Services, clock
from ragraph.runtime.generate import generated_text, generation_request
from ragraph.runtime.llm.chat import Prompt
from ragraph.runtime.llm.failure import error_of
from ragraph.runtime.request import RequestState
from ragraph.runtime.retrieval.options import SearchSpec


async def all_at_once(thunks: Sequence[Thunk]) -> list:
    return list(await asyncio.gather(*(thunk() for thunk in thunks)))


class Baseline(Interpreter[RequestState, Prompt]):
    """Engine calls issued one request at a time (searches on `pool`), every unit reported to
    the run's hooks and tracer."""

    def __init__(self, program: Program, services: Services, pool: ThreadPool | None = None,
                 fan=one_after_another) -> None:  # noqa: ANN001 -- a Fan
        super().__init__(program)
        self.services, self.pool, self.fan = services, pool, fan

    def unit_start(self, req: RequestState) -> float:
        """When the unit now run began (stage-batched: its batch's search began earlier)."""
        return clock()

    async def run_unit(self, unit: Unit[Any], req: RequestState) -> None:
        start = self.unit_start(req)
        await super().run_unit(unit, req)
        end, node = clock(), unit.node
        if isinstance(node, Retrieve):
            self.services.tracer.add_span(req.name, f"retrieve {node.id}", start, end,
                                          engine=False)
        if isinstance(node, Retrieve | Merge):
            req.retrievals.extend(effects.retrieved(req.variables[node.output]))
        self.services.hooks.unit_completed(req, node, start, end)

    def render_prompt(self, chain: GenerationChain, variables: dict) -> Prompt:
        return effects.generation_prompt_of(chain.prompt, variables, chain.system, chain.chat)

    async def complete(self, chain: GenerationChain, req: RequestState, prompt: Prompt,
                       branch: int | None) -> GeneratedText:
        """One engine stream (`generation_request` names it by request, node, visit and
        branch)."""
        s, node = self.services, self.program.unit(chain.origin)  # its Generate: unsplit here
        start = clock()
        stream = s.llm.submit(generation_request(req.rid, node, prompt,  # type: ignore[arg-type]
                                                 attempt=len(req.path), branch=branch))
        while (event := await stream.next_event()) is not None:
            if req.first_token_at is None:
                req.first_token_at = clock()
            if branch is None:  # a branch's text is one item of a list, not the output's text
                s.hooks.text(req.rid, chain.origin, chain.output, event.text)
        result = await stream.result(raise_on_error=False)
        end = clock()
        label = chain.origin if branch is None else f"{chain.origin}[{branch}]"
        s.tracer.add_span(req.name, f"generate {label}", start, end, engine=False)
        s.tracer.add_span("llm", f"{req.name} {label}", start, end)
        error = error_of(result, f"node {label!r}")  # typed: whose fault it was
        if error is not None:
            raise error
        text = generated_text(result)
        s.hooks.generated(req.rid, chain.origin, result, prompt)
        return text

    async def search(self, chain: RetrievalChain, req: RequestState, query: str,
                     branch: int | None) -> Passages:
        loop = asyncio.get_running_loop()
        spec = req.request.search.spec(chain.topk, chain.mode, chain.where)
        return await loop.run_in_executor(self.pool, search_blocking, self.services, chain,
                                          query, spec)

    def assign_passages(self, chain: RetrievalChain, req: RequestState, passages: Passages,
                        query: str) -> None:
        super().assign_passages(chain, req, passages, query)
        self.services.hooks.retrieved(req.rid, chain.origin,
                                      lambda: whole_search(self.services, chain, query, passages))


def search_blocking(services: Services, chain: RetrievalChain, query: str,
                    spec: SearchSpec) -> Passages:
    start = clock()
    passages = services.search.search(query, spec, chain.nprobe)
    services.tracer.add_span("search", f"retrieve {chain.origin}", start, clock())
    return passages


def whole_search(services: Services, chain: RetrievalChain, query: str,
                 passages: Passages) -> Searched:
    """A retrieval the baselines searched in one step over its whole probe list."""
    nprobe = services.search.probes(chain.nprobe)
    return Searched(query, nprobe, steps=1, clusters=nprobe, passages=passages)
