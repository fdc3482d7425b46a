"""One interpreter of a program: one method per unit kind, over the one walk (`program.walk`).

The shape of torch.fx's `Interpreter`: `dispatch` looks the unit's kind up in `HANDLERS` and
calls the method of that name with the unit as lowering resolved it (`program.Unit`: its node
and its typed chain; no lookup at run time). `UnitInterpreter` is the synchronous core every executor shares:
given a request and the unit it reached, it applies what the unit does to the request's
variables and says whether the unit completed at once or waits on engine work (`W`, the
subclass's own: an awaitable here, a job of the wavefront). A subclass overrides only how engine
calls are issued and batched (`issue_generation`/`collect_generation`,
`issue_retrieval`/`collect_retrieval`, `wait`, `verify`, `render_prompt`) and what it records
around a unit.

- `Interpreter`, the async walker over that core (`run` drives one request to END through its
  `Walk`, awaiting the work each unit returns; `eager` runs a rewired region as its DATA edges
  allow, latest ready first, else in control order): the reference walk, `passes/reference.py` (fake engines, every
  program, sync); the thread pool, `runtime/executors/nodes.py` (`sequential`: one request per
  worker); stage-batched, `runtime/executors/stage_batched.py` (generations of all requests at
  once; their searches in one batched call through `retrieval_queries`/`retrieved`); the
  LangGraph lowering, `runtime/executors/langgraph_app.py` (one LangGraph node per unit, its
  body `run_unit`; a map's branches call `complete`/`search`, its gather `assign_items`).
- The wavefront, `runtime/scheduler/units.py`: its issue methods hand the work to the engines'
  two sides, its `wait` makes probe, search-steps, prefill and decode wait for a stage of that
  work, and the engines' reports complete the units later, across requests.

Unit kind -> the one place that says what it does (here, for every executor above):

- generate: `generate` = `prefill` (render the prompt, one per branch, kept on the request;
  issue the generation) then `finish` (collect it: `complete` per branch in the walkers, the
  text assigned by `ir.effects.apply_generation_to`).
- retrieve: `retrieve` = `embed_query` (render the query; issue the search) then
  `retrieve_commit` (collect it: `search` per branch in the walkers, the passages assigned).
- merge: `merge` (`ir.effects.apply_merge`).
- probe, cache-lookup, search-steps, decode: `wait` (nothing in the walkers: the search and the
  decode run whole at the chain's last unit). spec-verify: `verify` (declined in the walkers).
  fork, join, start, end: `nothing` (a region is the walk's: `program.walk`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Generic, Protocol, TypeVar

from ragraph.errors import WorkflowError
from ragraph.ir import effects
from ragraph.ir.nodes import END, Merge
from ragraph.ir.values import GeneratedText, Passages, Value
from ragraph.program.program import GenerationChain, Program, RetrievalChain, Unit
from ragraph.program.walk import Walk, WalkState

# Unit kind -> the method that runs it. Prefetch is a side node: never walked.
HANDLERS: dict[str, str] = {kind: kind.replace("-", "_") for kind in (
    "start", "end", "generate", "retrieve", "merge", "embed-query", "probe", "cache-lookup",
    "search-steps", "retrieve-commit", "prefill", "decode", "finish", "spec-verify", "fork",
    "join")}


class UnitState(Protocol):
    """What a unit reads and writes of a request."""

    variables: dict[str, Value]
    # A split chain's rendered prompts or queries, by origin, from its first unit to its last.
    rendered: dict[str, Any]


class Walked(UnitState, WalkState, Protocol):
    """A request the async walker runs: what its units and its walk read and write."""


R = TypeVar("R", bound=UnitState)
RW = TypeVar("RW", bound=Walked)  # the async walker's requests carry their own walk
P = TypeVar("P")  # a rendered prompt: completion text, or a chat turn in the runtime
W = TypeVar("W")  # the work a unit waits on when it does not complete at once
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


class UnitInterpreter(Generic[R, P, W]):
    """What each unit kind does, synchronously: a handler applies the unit to the request and
    returns None when it completed, else the work it waits on. It keeps no request state (a
    split chain's rendering waits on the request, in `rendered`), so one instance serves many
    requests at once."""

    def dispatch(self, unit: Unit[Any], req: R) -> W | None:
        method = HANDLERS.get(unit.kind)
        if method is None:
            raise WorkflowError(f"no executor runs a {unit.kind!r} node", node=unit.id)
        return getattr(self, method)(unit, req)

    def nothing(self, unit: Unit[Any], req: R) -> W | None:
        """A unit with no visible effect."""
        return None

    start = end = fork = join = nothing  # a region is the walk's to schedule

    def probe(self, unit: Unit[Any], req: R) -> W | None:
        return self.wait(unit, req)

    cache_lookup = search_steps = decode = probe

    def spec_verify(self, unit: Unit[Any], req: R) -> W | None:
        return self.verify(unit, req)

    def merge(self, unit: Unit[Merge], req: R) -> W | None:
        effects.apply_merge(unit.chain, req.variables)
        return None

    # Generation ---------------------------------------------------------------------------
    def generate(self, unit: Unit[GenerationChain], req: R) -> W | None:
        chain = unit.chain
        prompts = self.prompts(chain, req.variables)
        self.issue_generation(chain, req, prompts)
        return self.collect_generation(chain, req, unit.id, prompts)

    def prefill(self, unit: Unit[GenerationChain], req: R) -> W | None:
        chain = unit.chain
        prompts = req.rendered[chain.origin] = self.prompts(chain, req.variables)
        self.issue_generation(chain, req, prompts)
        return self.wait(unit, req)

    def finish(self, unit: Unit[GenerationChain], req: R) -> W | None:
        chain = unit.chain
        return self.collect_generation(chain, req, unit.id, req.rendered.pop(chain.origin))

    def prompts(self, chain: GenerationChain, variables: dict[str, Value]) -> P | list[P]:
        """The prompt, or one per branch of a map."""
        if not chain.each:
            return self.render_prompt(chain, variables)
        return [self.render_prompt(chain, v)
                for v in effects.branches(chain.each, variables, chain.origin)]

    def render_prompt(self, chain: GenerationChain, variables: dict[str, Value]) -> P:
        return chain.flat_prompt.render(variables)  # type: ignore[return-value]

    # Retrieval ----------------------------------------------------------------------------
    def retrieve(self, unit: Unit[RetrievalChain], req: R) -> W | None:
        chain = unit.chain
        queries = self.retrieval_queries(chain, req.variables)
        self.issue_retrieval(chain, req, queries)
        return self.collect_retrieval(chain, req, unit.id, queries)

    def embed_query(self, unit: Unit[RetrievalChain], req: R) -> W | None:
        chain = unit.chain
        queries = req.rendered[chain.origin] = self.retrieval_queries(chain, req.variables)
        self.issue_retrieval(chain, req, queries)
        return self.wait(unit, req)

    def retrieve_commit(self, unit: Unit[RetrievalChain], req: R) -> W | None:
        chain = unit.chain
        return self.collect_retrieval(chain, req, unit.id, req.rendered.pop(chain.origin))

    def retrieval_queries(self, chain: RetrievalChain,
                          variables: dict[str, Value]) -> str | list[str]:
        """The query, or one per branch of a map."""
        if not chain.each:
            return effects.retrieval_query_of(chain.query, variables)
        return [effects.retrieval_query_of(chain.query, v)
                for v in effects.branches(chain.each, variables, chain.origin)]

    # How engine calls are issued: what a subclass overrides ------------------------------
    def issue_generation(self, chain: GenerationChain, req: R, prompts: Any) -> None:
        """The chain's first unit: start its generation (the walkers call at its last)."""

    def issue_retrieval(self, chain: RetrievalChain, req: R, queries: str | list[str]) -> None:
        """The chain's first unit: start its search (the walkers call at its last)."""

    def wait(self, unit: Unit[Any], req: R) -> W | None:
        """A unit that waits for a stage of its chain's engine work (none in the walkers)."""
        return None

    def verify(self, unit: Unit[Any], req: R) -> W | None:
        """Speculation's commit point (the walkers never speculate)."""
        return None

    def collect_generation(self, chain: GenerationChain, req: R, uid: str,
                           prompts: Any) -> W | None:
        """The chain's last unit: its text, assigned."""
        raise NotImplementedError

    def collect_retrieval(self, chain: RetrievalChain, req: R, uid: str,
                          queries: str | list[str]) -> W | None:
        """The chain's last unit: its passages, assigned."""
        raise NotImplementedError


class Interpreter(UnitInterpreter[RW, P, Awaitable[None]]):
    """The async walker: runs one request at a time to END over the core, awaiting each unit's
    engine calls, which run whole at a chain's last unit."""

    fan: Callable[[Sequence[Thunk]], Awaitable[list]] = staticmethod(one_after_another)
    # The walk's scheduling choice: a rewired region's members in the order their DATA edges
    # allow, latest ready first (the reference's eager schedule), else in control order.
    eager: bool = False

    def __init__(self, program: Program) -> None:
        self.program = program

    def advance(self, req: WalkState) -> str:
        """One step of the walk in control order (a region's members one after another):
        the unit entered after `req.node` completed (the stage-batched and LangGraph drivers
        step requests so)."""
        (uid,) = Walk(self.program, req, regions=False).completed(req.node)
        self.entered(req, uid)
        return uid

    def entered(self, req: Any, uid: str) -> None:
        """A subclass's hook on every unit the walk enters (the reference counts steps)."""

    async def run(self, req: RW) -> None:
        """Walk `req` from where it is to END, running each unit it enters, one at a time."""
        walk = Walk(self.program, req, regions=self.eager)
        ready = self._enter(req, walk.completed(req.node))
        while ready:
            uid = ready.pop()
            if uid == END:
                return
            await self.run_unit(self.program.units[uid], req)
            ready += self._enter(req, walk.completed(uid))
        raise WorkflowError(f"the region the request is in after {req.node!r} has a DATA cycle",
                            node=req.node)

    def _enter(self, req: RW, uids: list[str]) -> list[str]:
        for uid in uids:
            self.entered(req, uid)
        return uids

    async def run_unit(self, unit: Unit[Any], req: RW) -> None:
        work = self.dispatch(unit, req)
        if work is not None:
            await work

    def collect_generation(self, chain: GenerationChain, req: RW, uid: str,
                           prompts: Any) -> Awaitable[None]:
        return self.generated(chain, req, prompts)

    def collect_retrieval(self, chain: RetrievalChain, req: RW, uid: str,
                          queries: str | list[str]) -> Awaitable[None]:
        return self.retrieved(chain, req, queries)

    async def generated(self, chain: GenerationChain, req: RW, prompts: Any) -> None:
        if not chain.each:
            text = await self.complete(chain, req, prompts, None)
            self.assign_generation(chain, req, text, prompts)
            return
        texts = await self.fan([_thunk(self.complete, chain, req, p, i)
                                for i, p in enumerate(prompts)])
        self.assign_items(chain.origin, chain.output, req,
                          [effects.generated_value(t) for t in texts], prompts)

    async def complete(self, chain: GenerationChain, req: RW, prompt: P,
                       branch: int | None) -> GeneratedText:
        """The engine call of one generation (one branch of a map)."""
        raise NotImplementedError

    def assign_generation(self, chain: GenerationChain, req: RW, text: GeneratedText,
                          prompt: object) -> None:
        effects.apply_generation_to(chain.output, chain.append, req.variables, text,
                                    text.min_prob, chain.items)

    def assign_items(self, origin: str, output: str, req: RW, values: list[Value],
                     inputs: object) -> None:
        effects.apply_branches_to(output, req.variables, values)

    async def retrieved(self, chain: RetrievalChain, req: RW, queries: str | list[str]) -> None:
        if isinstance(queries, str):
            self.assign_passages(chain, req, await self.search(chain, req, queries, None),
                                 queries)
            return
        found = [await self.search(chain, req, q, i) for i, q in enumerate(queries)]
        self.assign_items(chain.origin, chain.output, req, found, queries)

    async def search(self, chain: RetrievalChain, req: RW, query: str,
                     branch: int | None) -> Passages:
        """The engine call of one search (one branch of a map: searched one after another,
        as an application's loop does)."""
        raise NotImplementedError

    def assign_passages(self, chain: RetrievalChain, req: RW, passages: Passages,
                        query: str) -> None:
        effects.apply_retrieval_to(chain.output, req.variables, passages)


def _thunk(fn: Callable[..., Awaitable[Any]], *args: Any) -> Thunk:
    return lambda: fn(*args)
