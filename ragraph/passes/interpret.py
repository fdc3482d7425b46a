"""One interpreter of a program: a walk along its control edges and one method per unit kind.

The shape of torch.fx's `Interpreter`: `run_unit` looks the unit's kind up in `HANDLERS` and
calls the method of that name; a subclass overrides only how engine calls are issued and batched
(`complete`, `search`, `fan`, `render_prompt`) and what it records around a unit. Every executor
of ragraph but the wavefront is this class or a subclass:

- the reference walk, `passes/reference.py` (fake engines, every program, sync),
- the thread pool, `runtime/executors/nodes.py` (`sequential`: one request per worker),
- stage-batched, `runtime/executors/stage_batched.py` (generations of all requests at once;
  their searches in one batched call through `retrieval_queries`/`retrieved`),
- the LangGraph lowering, `runtime/executors/langgraph_app.py` (one LangGraph node per unit,
  its body `run_unit`; a map's branches call `complete`/`search`, its gather `assign_items`).

Unit kind -> the one place that says what it does (here, for every executor above):

- generate: `generate` = `prefill` (render the prompt, one per branch) then `finish`
  (`complete` per branch, the text assigned by `ir.effects.apply_generation_to`).
- retrieve: `retrieve` = `embed_query` (render the query) then `retrieve_commit` (`search` per
  branch, the passages assigned).
- merge: `merge` (`ir.effects.apply_merge`).
- probe, cache-lookup, search-steps, decode, spec-verify, fork, join, start, end: `nothing`
  (no visible effect: the search and the decode run whole at the chain's last unit; speculation
  is declined; a rewired region runs in control order, or eagerly in the reference's `fork`).

The wavefront scheduler (`runtime/scheduler/units.py`) runs the same programs unit by unit
across requests; to plug in, its dispatch becomes a subclass whose handlers hand the engine work
of `probe`, `search_steps`, `prefill`, `decode` to its two sides instead of calling `complete`
and `search` inline, and whose `retrieve_commit`/`finish` assign through the same
`assign_generation`/`assign_passages` as here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Generic, Protocol, TypeVar

from ragraph.errors import WorkflowError
from ragraph.ir import effects
from ragraph.ir.control import choose_edge
from ragraph.ir.nodes import END, Generate, Merge, Node, Retrieve
from ragraph.ir.stages import slot
from ragraph.ir.values import GeneratedText, Passages, Value
from ragraph.passes.lower import GenerationChain, Program, RetrievalChain

# Unit kind -> the method that runs it. Prefetch is a side node: never walked.
HANDLERS: dict[str, str] = {kind: kind.replace("-", "_") for kind in (
    "start", "end", "generate", "retrieve", "merge", "embed-query", "probe", "cache-lookup",
    "search-steps", "retrieve-commit", "prefill", "decode", "finish", "spec-verify", "fork",
    "join")}


class WalkState(Protocol):
    """What the walk reads and writes of a request (the runtime's RequestState is one)."""

    node: str
    variables: dict[str, Value]
    loop_counts: Counter[int]


R = TypeVar("R", bound=WalkState)
P = TypeVar("P")  # a rendered prompt: completion text, or a chat turn in the runtime
Thunk = Callable[[], Awaitable[Any]]


async def one_after_another(thunks: Sequence[Thunk]) -> list:
    """A map's branches as an application's loop runs them."""
    return [await thunk() for thunk in thunks]


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never waits (the interpreter with blocking engines) to its value."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("an interpreter run without an event loop awaited real work")


class Interpreter(Generic[R, P]):
    """Runs programs; one instance may run many requests at once (it keeps no request state:
    a split chain's rendered text waits in `rendered`, by request and origin)."""

    fan: Callable[[Sequence[Thunk]], Awaitable[list]] = staticmethod(one_after_another)

    def __init__(self, program: Program) -> None:
        self.program = program
        self.rendered: dict[tuple[int, str], object] = {}

    # The walk ---------------------------------------------------------------------------
    async def run(self, req: R) -> None:
        """Walk `req` from where it is to END, running each unit it enters."""
        while self.advance(req) != END:
            await self.run_unit(self.program.unit(req.node), req)

    def advance(self, req: R) -> str:
        """Follow the control edge `choose_edge` picks; returns the unit entered."""
        edge = choose_edge(self.program.graph, req.node, req.variables, req.loop_counts)
        req.node = edge.dst
        self.entered(req, edge.dst)
        return edge.dst

    def entered(self, req: R, uid: str) -> None:
        """A subclass's record of the walk (the runtime's request path)."""

    async def run_unit(self, unit: Node, req: R) -> None:
        method = HANDLERS.get(unit.kind)
        if method is None:
            raise WorkflowError(f"no executor runs a {unit.kind!r} node", node=unit.id)
        await getattr(self, method)(unit, req)

    async def nothing(self, unit: Node, req: R) -> None:
        """A unit with no visible effect here."""

    start = end = probe = cache_lookup = search_steps = decode = spec_verify = nothing
    fork = join = nothing  # a rewired region runs in control order (see reference's eager)

    # Generation ---------------------------------------------------------------------------
    async def generate(self, unit: Generate, req: R) -> None:
        chain = self.program.generations[unit.id]
        await self.generated(chain, req, self.prompts(chain, req.variables))

    async def prefill(self, unit: Node, req: R) -> None:
        chain = self.program.generations[self.program.origin(unit.id)]
        self.rendered[id(req), slot(chain.origin, "prompt")] = self.prompts(chain, req.variables)

    async def finish(self, unit: Node, req: R) -> None:
        chain = self.program.generations[self.program.origin(unit.id)]
        await self.generated(chain, req, self.rendered.pop((id(req), slot(chain.origin, "prompt"))))

    def prompts(self, chain: GenerationChain, variables: dict[str, Value]) -> P | list[P]:
        """The prompt, or one per branch of a map."""
        if not chain.each:
            return self.render_prompt(chain, variables)
        return [self.render_prompt(chain, v)
                for v in effects.branches(chain.each, variables, chain.origin)]

    def render_prompt(self, chain: GenerationChain, variables: dict[str, Value]) -> P:
        return chain.flat_prompt.render(variables)  # type: ignore[return-value]

    async def generated(self, chain: GenerationChain, req: R, prompts: Any) -> None:
        if not chain.each:
            text = await self.complete(chain, req, prompts, None)
            self.assign_generation(chain, req, text, prompts)
            return
        texts = await self.fan([_thunk(self.complete, chain, req, p, i)
                                for i, p in enumerate(prompts)])
        self.assign_items(chain.origin, chain.output, req,
                          [effects.generated_value(t) for t in texts], prompts)

    async def complete(self, chain: GenerationChain, req: R, prompt: P,
                       branch: int | None) -> GeneratedText:
        """The engine call of one generation (one branch of a map)."""
        raise NotImplementedError

    def assign_generation(self, chain: GenerationChain, req: R, text: GeneratedText,
                          prompt: object) -> None:
        effects.apply_generation_to(chain.output, chain.append, req.variables, text,
                                    text.min_prob, chain.items)

    def assign_items(self, origin: str, output: str, req: R, values: list[Value],
                     inputs: object) -> None:
        effects.apply_branches_to(output, req.variables, values)

    # Retrieval ----------------------------------------------------------------------------
    async def retrieve(self, unit: Retrieve, req: R) -> None:
        chain = self.program.retrievals[unit.id]
        await self.retrieved(chain, req, self.retrieval_queries(chain, req.variables))

    async def embed_query(self, unit: Node, req: R) -> None:
        chain = self.program.retrievals[self.program.origin(unit.id)]
        self.rendered[id(req), slot(chain.origin, "qtext")] = self.retrieval_queries(
            chain, req.variables)

    async def retrieve_commit(self, unit: Node, req: R) -> None:
        chain = self.program.retrievals[self.program.origin(unit.id)]
        await self.retrieved(chain, req, self.rendered.pop((id(req), slot(chain.origin, "qtext"))))

    def retrieval_queries(self, chain: RetrievalChain,
                          variables: dict[str, Value]) -> str | list[str]:
        """The query, or one per branch of a map."""
        if not chain.each:
            return effects.retrieval_query_of(chain.query, variables)
        return [effects.retrieval_query_of(chain.query, v)
                for v in effects.branches(chain.each, variables, chain.origin)]

    async def retrieved(self, chain: RetrievalChain, req: R, queries: str | list[str]) -> None:
        if isinstance(queries, str):
            self.assign_passages(chain, req, await self.search(chain, req, queries, None),
                                 queries)
            return
        found = [await self.search(chain, req, q, i) for i, q in enumerate(queries)]
        self.assign_items(chain.origin, chain.output, req, found, queries)

    async def search(self, chain: RetrievalChain, req: R, query: str,
                     branch: int | None) -> Passages:
        """The engine call of one search (one branch of a map: searched one after another,
        as an application's loop does)."""
        raise NotImplementedError

    def assign_passages(self, chain: RetrievalChain, req: R, passages: Passages,
                        query: str) -> None:
        effects.apply_retrieval_to(chain.output, req.variables, passages)

    # Merge --------------------------------------------------------------------------------
    async def merge(self, unit: Merge, req: R) -> None:
        effects.apply_merge(unit, req.variables)


def _thunk(fn: Callable[..., Awaitable[Any]], *args: Any) -> Thunk:
    return lambda: fn(*args)
