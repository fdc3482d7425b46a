"""A ragraph workflow lowered to a real LangGraph `StateGraph`, written as a practitioner would.

Each Generate or Retrieve node becomes a LangGraph node that renders its prompt or query from
the state, calls the LLM or the index, and writes its output variable. Where to go next is the
workflow's own control semantics (`choose_edge`, the function every executor shares): the node
records its choice in the state and a conditional edge follows it, so loops and branches are
LangGraph's and the answers are the workflow's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypedDict

from ragraph.errors import ConfigError
from ragraph.ir.control import choose_edge
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START, Generate, Node, Retrieve
from ragraph.ir.values import Value
from ragraph.runtime import effects
from ragraph.runtime.executors.app_clients import AppLLM, AppRetriever
from ragraph.runtime.executors.base import clock
from ragraph.runtime.generate import sampling_params
from ragraph.runtime.trace import Tracer

# State keys of the lowering itself, beside the workflow's variables.
RID, LOOPS, PATH, NEXT, PASSAGES = ("ragraph_rid", "ragraph_loops", "ragraph_path",
                                    "ragraph_next", "ragraph_passages")
INTERNAL = frozenset({RID, LOOPS, PATH, NEXT, PASSAGES})
# LangGraph's bound on steps per run; the workflows' loops are bounded far below it.
RECURSION_LIMIT = 1000


def variables_of(graph: RAGraph) -> list[str]:
    return sorted(set(graph.inputs) | {v for n in graph.nodes() for v in n.writes()})


def build_app(graph: RAGraph, llm: AppLLM, retriever: AppRetriever, tracer: Tracer):
    """The compiled LangGraph app of `graph`."""
    try:
        from langgraph.graph import END as LG_END  # noqa: PLC0415
        from langgraph.graph import START as LG_START  # noqa: PLC0415
        from langgraph.graph import StateGraph  # noqa: PLC0415
    except ImportError as err:
        raise ConfigError("executor", "the langgraph executor needs the langgraph package: "
                          "pip install 'ragraph[langgraph]'") from err
    names = variables_of(graph)
    clash = INTERNAL & set(names)
    if clash:
        raise ConfigError("executor", f"workflow {graph.name!r} uses {sorted(clash)[0]!r}, a "
                          "name the LangGraph lowering keeps for itself")
    fields: dict[str, Any] = {name: Any for name in [*names, *sorted(INTERNAL)]}
    state_type = TypedDict(f"{graph.name}_state", fields, total=False)  # type: ignore[misc]
    builder = StateGraph(state_type)
    work = [n for n in graph.nodes() if isinstance(n, Generate | Retrieve)]
    node_names = {n.id: f"{n.kind}_{n.id}" for n in work}
    for node in work:
        builder.add_node(node_names[node.id], _node(graph, node, llm, retriever, tracer))
    targets = {**node_names, END: LG_END}
    builder.add_conditional_edges(LG_START, _route, targets)
    for name in node_names.values():
        builder.add_conditional_edges(name, _route, targets)
    return builder.compile()


def initial_state(graph: RAGraph, rid: str, variables: dict[str, Value]) -> dict[str, Any]:
    loops: Counter[int] = Counter()
    first = choose_edge(graph, START, variables, loops).dst
    return {**variables, RID: rid, LOOPS: loops, PATH: [first], NEXT: first, PASSAGES: None}


def _route(state: dict[str, Any]) -> str:
    return state[NEXT]


def _node(graph: RAGraph, node: Node, llm: AppLLM, retriever: AppRetriever,
          tracer: Tracer) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def run(state: dict[str, Any]) -> dict[str, Any]:
        values = {k: v for k, v in state.items() if k not in INTERNAL}
        update: dict[str, Any] = {}
        start = clock()
        if isinstance(node, Generate):
            prompt = effects.generation_prompt(node, values)
            text = llm.complete(prompt, sampling_params(node.sampling))
            effects.apply_generation(node, values, text, text.min_prob)
            label = f"generate {node.id}"
        else:
            query = effects.retrieval_query(node, values)
            passages = retriever.retrieve(query, node.topk, node.nprobe)
            effects.apply_retrieval(node, values, passages)
            update[PASSAGES] = passages
            label = f"retrieve {node.id}"
        tracer.add_span(state[RID], label, start, clock(), engine=False)
        loops = Counter(state[LOOPS])
        nxt = choose_edge(graph, node.id, values, loops).dst
        output = node.output  # type: ignore[attr-defined]
        return {**update, output: values[output], LOOPS: loops, PATH: [*state[PATH], nxt],
                NEXT: nxt}

    return run
