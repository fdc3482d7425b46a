"""A ragraph workflow lowered to a real LangGraph `StateGraph`, written as a practitioner would.

Each Generate or Retrieve node becomes a LangGraph node that renders its prompt or query from
the state, calls the LLM or the index, and writes its output variable. Where to go next is the
workflow's own control semantics (`choose_edge`, the function every executor shares): the node
records its choice in the state and a conditional edge follows it, so loops and branches are
LangGraph's and the answers are the workflow's. A map is LangGraph's map-reduce: the edge into it
sends one `Send` per item to a branch node, each branch adds its (index, result) to a reducing
key, and a gather node writes the list in item order; a merge is a plain node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from ragraph.errors import ConfigError
from ragraph.ir.control import choose_edge
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START, Generate, Merge, Node, Retrieve
from ragraph.ir.values import Value
from ragraph.runtime import effects
from ragraph.runtime.events import Searched
from ragraph.runtime.executors.app_clients import AppLLM, AppRetriever
from ragraph.runtime.executors.base import clock
from ragraph.runtime.executors.langgraph_report import NodeDone, NodeReports

# State keys of the lowering itself, beside the workflow's variables.
RID, LOOPS, PATH, NEXT, PASSAGES, FAN = ("ragraph_rid", "ragraph_loops", "ragraph_path",
                                         "ragraph_next", "ragraph_passages", "ragraph_fan")
INTERNAL = frozenset({RID, LOOPS, PATH, NEXT, PASSAGES, FAN})
# LangGraph's bound on steps per run; the workflows' loops are bounded far below it.
RECURSION_LIMIT = 1000


def variables_of(graph: RAGraph) -> list[str]:
    return sorted(set(graph.inputs) | {v for n in graph.nodes() for v in n.writes()})


def build_app(graph: RAGraph, llm: AppLLM, retriever: AppRetriever, reports: NodeReports):
    """The compiled LangGraph app of `graph`; its nodes report to `reports`."""
    try:
        from langgraph.graph import END as LG_END  # noqa: PLC0415
        from langgraph.graph import START as LG_START  # noqa: PLC0415
        from langgraph.graph import StateGraph  # noqa: PLC0415
        from langgraph.types import Send  # noqa: PLC0415
    except ImportError as err:
        raise ConfigError("executor", "the langgraph executor needs the langgraph package: "
                          "pip install 'ragraph[langgraph]'") from err
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
            builder.add_node(names_of[node.id] + "_branch", _branch(node, llm, retriever, reports))
            builder.add_node(names_of[node.id], _gather(graph, node, reports))
            builder.add_edge(names_of[node.id] + "_branch", names_of[node.id])
        else:
            builder.add_node(names_of[node.id], _node(graph, node, llm, retriever, reports))
    targets = {**names_of, END: LG_END}
    route = _router(graph, names_of, Send)
    builder.add_conditional_edges(LG_START, route, targets)
    for node in work:
        builder.add_conditional_edges(names_of[node.id], route, targets)
    return builder.compile()


def _collect(old: list | None, new: list | None) -> list:
    """The reducer of a map's results: branches add (index, value, started) triples; None
    empties it."""
    return [] if new is None else [*(old or []), *new]


def initial_state(graph: RAGraph, rid: str, variables: dict[str, Value]) -> dict[str, Any]:
    loops: Counter[int] = Counter()
    first = choose_edge(graph, START, variables, loops).dst
    return {**variables, RID: rid, LOOPS: loops, PATH: [first], NEXT: first, PASSAGES: None}


def _router(graph: RAGraph, names_of: dict[str, str], send: type) -> Callable:
    """The conditional edge out of every node: to the node it chose, or for a map one Send per
    item to the map's branch node (straight to its gather when the list is empty)."""
    def route(state: dict[str, Any]) -> Any:
        nxt = state[NEXT]
        each = getattr(graph.node(nxt), "each", ()) if nxt != END else ()
        if not each:
            return nxt
        values = _values(state)
        payloads = [{**v, RID: state[RID], FAN: i}
                    for i, v in enumerate(effects.branches(each, values, nxt))]
        return [send(names_of[nxt] + "_branch", p) for p in payloads] or nxt

    return route


def _values(state: dict[str, Any]) -> dict[str, Value]:
    return {k: v for k, v in state.items() if k not in INTERNAL}


def _compute(node: Node, values: dict[str, Value], llm: AppLLM, retriever: AppRetriever) -> Value:
    """What the node's engine call returns for these variables (one branch, for a map)."""
    if isinstance(node, Generate):
        prompt = effects.generation_prompt(node, values)
        return llm.complete(prompt, node.sampling)
    query = effects.retrieval_query(node, values)  # type: ignore[arg-type]
    return retriever.retrieve(query, node.topk, node.nprobe)  # type: ignore[attr-defined]


def _advance(graph: RAGraph, node: Node, state: dict[str, Any], values: dict[str, Value],
             update: dict[str, Any]) -> dict[str, Any]:
    """The state update after `node` assigned its output in `values`: the output, the loop
    counters, the path and the next node (`choose_edge`)."""
    loops = Counter(state[LOOPS])
    nxt = choose_edge(graph, node.id, values, loops).dst
    output = node.output  # type: ignore[attr-defined]
    found = effects.retrieved(values[output])
    if found and not isinstance(node, Generate):
        update[PASSAGES] = found[-1]
    return {**update, output: values[output], LOOPS: loops, PATH: [*state[PATH], nxt], NEXT: nxt}


def _node(graph: RAGraph, node: Node, llm: AppLLM, retriever: AppRetriever,
          reports: NodeReports) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def run(state: dict[str, Any]) -> dict[str, Any]:
        values = _values(state)
        start, searched = clock(), None
        if isinstance(node, Merge):
            effects.apply_merge(node, values)
        elif isinstance(node, Generate):
            text = _compute(node, values, llm, retriever)
            effects.apply_generation(node, values, text, text.min_prob)  # type: ignore[union-attr]
        else:
            query = effects.retrieval_query(node, values)  # type: ignore[arg-type]
            passages = retriever.retrieve(query, node.topk, node.nprobe)  # type: ignore[attr-defined]
            effects.apply_retrieval(node, values, passages)  # type: ignore[arg-type]
            # One faiss search over the whole probe list, as the other baselines report it.
            probes = retriever.probes(node.nprobe)  # type: ignore[attr-defined]
            searched = Searched(query, probes, steps=1, clusters=probes, passages=passages)
        reports.node_done(NodeDone(state[RID], node, dict(values), start, clock(), searched))
        return _advance(graph, node, state, values, {})

    return run


def _branch(node: Node, llm: AppLLM, retriever: AppRetriever,
            reports: NodeReports) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """One item of a map: its payload is the request's variables with the item bound."""
    def run(payload: dict[str, Any]) -> dict[str, Any]:
        start, branch = clock(), payload[FAN]
        value = _compute(node, _values(payload), llm, retriever)
        if isinstance(node, Generate):
            value = effects.generated_value(value)  # type: ignore[arg-type]
        reports.branch_done(payload[RID], f"{node.kind} {node.id}[{branch}]", start, clock())
        return {FAN: [(branch, value, start)]}

    return run


def _gather(graph: RAGraph, node: Node,
            reports: NodeReports) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A map's node completes here: from its first branch's start (now, with no items)."""
    def run(state: dict[str, Any]) -> dict[str, Any]:
        values, fan = _values(state), sorted(state.get(FAN) or [], key=lambda p: p[0])
        effects.apply_branches_to(node.output, values, [value for _, value, _ in fan])  # type: ignore[attr-defined]
        end = clock()
        reports.node_done(NodeDone(state[RID], node, dict(values),
                                   min((started for *_, started in fan), default=end), end))
        return _advance(graph, node, state, values, {FAN: None})

    return run
