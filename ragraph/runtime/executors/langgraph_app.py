"""A ragraph workflow lowered to a real LangGraph `StateGraph`, written as a practitioner would.

Each Generate, Retrieve or Merge unit of the workflow's program (as written) becomes a LangGraph
node whose body is the base interpreter's handler for that unit (`program.interpret`), with the
app's own clients as its engines (`_App`): it renders its prompt or query from the state, calls
the LLM or the index, and writes its output variable. Where to go next is the interpreter's walk
(`choose_edge`, the function every executor shares): the node records its choice in the state
and a conditional edge follows it, so loops and branches are LangGraph's and the answers are the
workflow's. A map is LangGraph's map-reduce: the edge into it sends one `Send` per item to a
branch node (one `complete` or `search` of the interpreter), each branch adds its (index, result)
to a reducing key, and a gather node writes the list in item order (`assign_items`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from ragraph.errors import ConfigError
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START, Generate, Merge, Node, Retrieve
from ragraph.ir.values import GeneratedText, Passages, Value
from ragraph.program.interpret import Interpreter, run_sync
from ragraph.program.program import GenerationChain, Program, RetrievalChain
from ragraph.runtime import effects
from ragraph.runtime.events import Searched
from ragraph.runtime.executors.app_clients import AppLLM, AppRetriever
from ragraph.runtime.executors.base import clock
from ragraph.runtime.executors.langgraph_report import NodeDone, NodeReports
from ragraph.runtime.llm.chat import Prompt
from ragraph.runtime.retrieval.options import NO_OPTIONS

# State keys of the lowering itself, beside the workflow's variables.
RID, LOOPS, PATH, NEXT, PASSAGES, FAN = ("ragraph_rid", "ragraph_loops", "ragraph_path",
                                         "ragraph_next", "ragraph_passages", "ragraph_fan")
INTERNAL = frozenset({RID, LOOPS, PATH, NEXT, PASSAGES, FAN})
# LangGraph's bound on steps per run; the workflows' loops are bounded far below it.
RECURSION_LIMIT = 1000


def variables_of(graph: RAGraph) -> list[str]:
    return sorted(set(graph.inputs) | {v for n in graph.nodes() for v in n.writes()})


@dataclass
class _Visit:
    """One node's view of its request (`interpret.Walked`), built from the LangGraph state."""

    node: str
    variables: dict[str, Value]
    loop_counts: Counter[int] = field(default_factory=Counter)
    path: list[str] = field(default_factory=list)  # where the walk went from this node
    rendered: dict[str, Any] = field(default_factory=dict)
    searched: Searched | None = None  # what a (non-map) retrieval searched


class _App(Interpreter[_Visit, Prompt]):
    """The base interpreter with the app's own clients as its engines (blocking calls: its
    handlers run to completion under `run_sync`, on LangGraph's worker threads)."""

    def __init__(self, program: Program, llm: AppLLM, retriever: AppRetriever) -> None:
        super().__init__(program)
        self.llm, self.retriever = llm, retriever

    def render_prompt(self, chain: GenerationChain, variables: dict[str, Value]) -> Prompt:
        return effects.generation_prompt_of(chain.prompt, variables, chain.system, chain.chat)

    async def complete(self, chain: GenerationChain, req: _Visit, prompt: Prompt,
                       branch: int | None) -> GeneratedText:
        return self.llm.complete(prompt, chain.sampling)

    async def search(self, chain: RetrievalChain, req: _Visit, query: str,
                     branch: int | None) -> Passages:
        spec = NO_OPTIONS.spec(chain.topk, chain.mode, chain.where)
        passages = self.retriever.retrieve(query, spec, chain.nprobe)
        if branch is None:  # one faiss search over the whole probe list, as the baselines say
            probes = self.retriever.probes(chain.nprobe)
            req.searched = Searched(query, probes, steps=1, clusters=probes, passages=passages)
        return passages


def build_app(program: Program, llm: AppLLM, retriever: AppRetriever, reports: NodeReports):
    """The compiled LangGraph app of `program` (a workflow as written); its nodes report to
    `reports`."""
    try:
        from langgraph.graph import END as LG_END  # noqa: PLC0415
        from langgraph.graph import START as LG_START  # noqa: PLC0415
        from langgraph.graph import StateGraph  # noqa: PLC0415
        from langgraph.types import Send  # noqa: PLC0415
    except ImportError as err:
        raise ConfigError("executor", "the langgraph executor needs the langgraph package: "
                          "pip install 'ragraph[langgraph]'") from err
    graph, app = program.graph, _App(program, llm, retriever)
    names = variables_of(graph)
    clash = INTERNAL & set(names)
    if clash:
        raise ConfigError("executor", f"workflow {graph.name!r} uses {sorted(clash)[0]!r}, a "
                          "name the LangGraph lowering keeps for itself")
    fields: dict[str, Any] = {name: Any for name in [*names, *sorted(INTERNAL)]}
    fields[FAN] = Annotated[list, _collect]
    state_type = TypedDict(f"{graph.name}_state", fields, total=False)  # type: ignore[misc]
    builder = StateGraph(state_type)
    work = [n for n in graph.nodes() if isinstance(n, Generate | Retrieve | Merge)]
    names_of = {n.id: f"{n.kind}_{n.id}" for n in work}
    for node in work:
        if getattr(node, "each", ()):
            builder.add_node(names_of[node.id] + "_branch", _branch(app, node, reports))
            builder.add_node(names_of[node.id], _gather(app, node, reports))
            builder.add_edge(names_of[node.id] + "_branch", names_of[node.id])
        else:
            builder.add_node(names_of[node.id], _node(app, node, reports))
    targets = {**names_of, END: LG_END}
    route = _router(program, names_of, Send)
    builder.add_conditional_edges(LG_START, route, targets)
    for node in work:
        builder.add_conditional_edges(names_of[node.id], route, targets)
    return builder.compile()


def _collect(old: list | None, new: list | None) -> list:
    """The reducer of a map's results: branches add (index, value, started) triples; None
    empties it."""
    return [] if new is None else [*(old or []), *new]


def initial_state(program: Program, rid: str, variables: dict[str, Value]) -> dict[str, Any]:
    visit = _Visit(START, variables)
    first = Interpreter(program).advance(visit)
    return {**variables, RID: rid, LOOPS: visit.loop_counts, PATH: [first], NEXT: first,
            PASSAGES: None}


def _router(program: Program, names_of: dict[str, str], send: type) -> Callable:
    """The conditional edge out of every node: to the node it chose, or for a map one Send per
    item to the map's branch node (straight to its gather when the list is empty)."""
    def route(state: dict[str, Any]) -> Any:
        nxt = state[NEXT]
        each = getattr(program.unit(nxt), "each", ()) if nxt != END else ()
        if not each:
            return nxt
        values = _values(state)
        payloads = [{**v, RID: state[RID], FAN: i}
                    for i, v in enumerate(effects.branches(each, values, nxt))]
        return [send(names_of[nxt] + "_branch", p) for p in payloads] or nxt

    return route


def _values(state: dict[str, Any]) -> dict[str, Value]:
    return {k: v for k, v in state.items() if k not in INTERNAL}


def _visit(node: Node, state: dict[str, Any]) -> _Visit:
    return _Visit(node.id, _values(state), Counter(state.get(LOOPS) or {}))


def _advance(app: _App, node: Node, state: dict[str, Any], visit: _Visit,
             update: dict[str, Any]) -> dict[str, Any]:
    """The state update after `node` assigned its output: the output, the loop counters, the
    path and the next node (the interpreter's walk)."""
    nxt = app.advance(visit)
    output = node.output  # type: ignore[attr-defined]
    found = effects.retrieved(visit.variables[output])
    if found and not isinstance(node, Generate):
        update[PASSAGES] = found[-1]
    return {**update, output: visit.variables[output], LOOPS: visit.loop_counts,
            PATH: [*state[PATH], nxt], NEXT: nxt}


def _node(app: _App, node: Node,
          reports: NodeReports) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def run(state: dict[str, Any]) -> dict[str, Any]:
        visit, start = _visit(node, state), clock()
        run_sync(app.run_unit(app.program.units[node.id], visit))
        reports.node_done(NodeDone(state[RID], node, dict(visit.variables), start, clock(),
                                   visit.searched))
        return _advance(app, node, state, visit, {})

    return run


def _branch(app: _App, node: Node,
            reports: NodeReports) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """One item of a map: its payload is the request's variables with the item bound."""
    def run(payload: dict[str, Any]) -> dict[str, Any]:
        start, branch, visit = clock(), payload[FAN], _visit(node, payload)
        if isinstance(node, Generate):
            chain = app.program.generations[node.id]
            prompt = app.render_prompt(chain, visit.variables)
            value: Value = effects.generated_value(
                run_sync(app.complete(chain, visit, prompt, branch)))
        else:
            found = app.program.retrievals[node.id]
            query = effects.retrieval_query_of(found.query, visit.variables)
            value = run_sync(app.search(found, visit, query, branch))
        reports.branch_done(payload[RID], f"{node.kind} {node.id}[{branch}]", start, clock())
        return {FAN: [(branch, value, start)]}

    return run


def _gather(app: _App, node: Node,
            reports: NodeReports) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A map's node completes here: from its first branch's start (now, with no items)."""
    def run(state: dict[str, Any]) -> dict[str, Any]:
        visit = _visit(node, state)
        fan = sorted(state.get(FAN) or [], key=lambda p: p[0])
        output = node.output  # type: ignore[attr-defined]
        app.assign_items(node.id, output, visit, [value for _, value, _ in fan], None)
        end = clock()
        reports.node_done(NodeDone(state[RID], node, dict(visit.variables),
                                   min((started for *_, started in fan), default=end), end))
        return _advance(app, node, state, visit, {FAN: None})

    return run
