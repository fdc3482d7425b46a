"""A pure reference interpreter for compiled graphs, with every speculative edge declined.

`walk(graph, inputs)` runs one request through any graph (-O0 or optimized) with fake engines
(generation output = f(rendered prompt), retrieval = f(rendered query, topk)) and returns the
effects on request variables, in order. Sub-stages do what the runtime does minus the engines:
embed-query renders the query, prefill renders the prompt, the chain's last step assigns the
output; probe, cache-lookup, search-steps, decode, spec-verify (no speculative instance), fork and
join change nothing visible. Side nodes (prefetch) are never visited.

`schedule="control"` follows control edges (the -O0 order). `schedule="eager"` runs each rewired
region in the order its DATA edges allow that differs most from the control order (latest node
first), to check that the DATA edges capture every hazard: per variable, the writes and the
inputs they were computed from must equal the control schedule's (`by_variable`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ragraph.errors import WorkflowError
from ragraph.ir.control import choose_edge
from ragraph.ir.edges import EdgeKind
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START, Node
from ragraph.ir.stages import slot
from ragraph.ir.values import Passage, Passages, Value
from ragraph.passes.analysis import straight_next


def fake_generate(prompt: str) -> str:
    return "gen-" + hashlib.sha256(prompt.encode()).hexdigest()[:10]


def fake_retrieve(query: str, topk: int) -> Passages:
    digest = hashlib.sha256(query.encode()).hexdigest()
    return Passages(tuple(Passage(int(digest[i * 4:i * 4 + 4], 16), f"t{i}", f"{digest[:8]}-{i}")
                          for i in range(topk)))


@dataclass(frozen=True)
class FakeEngines:
    generate: Callable[[str], str] = fake_generate
    retrieve: Callable[[str, int], Passages] = fake_retrieve


@dataclass(frozen=True)
class Effect:
    """An assignment to a request variable by original node `node`, computed from `input`."""

    node: str
    var: str
    value: Value
    input: str


@dataclass
class _Request:
    graph: RAGraph
    engines: FakeEngines
    state: dict[str, Value]
    scratch: dict[str, str] = field(default_factory=dict)
    effects: list[Effect] = field(default_factory=list)

    def assign(self, node: str, var: str, value: Value, source: str, append: bool) -> None:
        # Same meaning as the runtime's apply_generation: append adds a line to non-empty text.
        if append and isinstance(value, str) and str(self.state.get(var, "")).strip():
            value = f"{str(self.state[var]).rstrip()}\n{value}"
        self.state[var] = value
        self.effects.append(Effect(node, var, value, source))

    def run(self, node: Node) -> None:
        kind = node.kind
        origin = getattr(node, "origin", node.id)
        if kind == "generate":
            prompt = node.prompt.render(self.state)  # type: ignore[attr-defined]
            self.assign(origin, node.output, self.engines.generate(prompt), prompt,  # type: ignore[attr-defined]
                        node.append)  # type: ignore[attr-defined]
        elif kind == "retrieve":
            query = node.query.render(self.state).strip()  # type: ignore[attr-defined]
            self.assign(origin, node.output, self.engines.retrieve(query, node.topk), query,  # type: ignore[attr-defined]
                        False)
        elif kind == "embed-query":
            self.scratch[slot(origin, "qtext")] = node.query.render(self.state).strip()  # type: ignore[attr-defined]
        elif kind == "prefill":
            self.scratch[slot(origin, "prompt")] = node.prompt.render(self.state)  # type: ignore[attr-defined]
        elif kind == "retrieve-commit":
            query = self.scratch[slot(origin, "qtext")]
            self.assign(origin, node.output, self.engines.retrieve(query, node.topk), query, False)  # type: ignore[attr-defined]
        elif kind == "finish":
            prompt = self.scratch[slot(origin, "prompt")]
            self.assign(origin, node.output, self.engines.generate(prompt), prompt, node.append)  # type: ignore[attr-defined]
        elif kind not in _NO_VISIBLE_EFFECT:
            raise WorkflowError(f"the reference walker does not know node kind {kind!r}",
                                node=node.id)


_NO_VISIBLE_EFFECT = frozenset({"start", "end", "probe", "cache-lookup", "search-steps", "decode",
                                "spec-verify", "fork", "join"})


def walk(graph: RAGraph, inputs: Mapping[str, Value], engines: FakeEngines = FakeEngines(), *,
         schedule: str = "control", max_steps: int = 10_000) -> tuple[Effect, ...]:
    """The effects of one request on `graph`, speculation declined."""
    if schedule not in ("control", "eager"):
        raise ValueError(f"schedule must be 'control' or 'eager', got {schedule!r}")
    state = {i.name: i.default for i in graph.inputs.values() if i.default is not None}
    req = _Request(graph, engines, {**state, **inputs})
    loops: Counter[int] = Counter()
    cur = START
    for _ in range(max_steps):
        node = graph.node(cur)
        if node.kind == "fork" and schedule == "eager":
            cur = _run_region(req, cur)
        else:
            req.run(node)
        if cur == END:
            return tuple(req.effects)
        cur = choose_edge(graph, cur, req.state, loops).dst
    raise WorkflowError(f"request did not reach END within {max_steps} steps")


def _run_region(req: _Request, fork: str) -> str:
    """Run a rewired region latest-ready-first along DATA edges; return its join's id."""
    chain = [fork]
    while req.graph.node(chain[-1]).kind != "join":
        nxt = straight_next(req.graph, chain[-1])
        if nxt is None:
            raise WorkflowError(f"fork {fork!r} does not reach its join", node=fork)
        chain.append(nxt)
    members = chain[1:-1]
    done = {fork}
    while len(done) <= len(members):
        ready = [m for m in members if m not in done and all(
            e.src in done for e in req.graph.in_edges(m) if e.kind == EdgeKind.DATA)]
        if not ready:
            raise WorkflowError(f"region after {fork!r} has a DATA cycle", node=fork)
        req.run(req.graph.node(ready[-1]))
        done.add(ready[-1])
    return chain[-1]


def by_variable(effects: tuple[Effect, ...]) -> dict[str, tuple[Effect, ...]]:
    """Each variable's writes in order: what any correct schedule must reproduce exactly."""
    out: dict[str, list[Effect]] = {}
    for e in effects:
        out.setdefault(e.var, []).append(e)
    return {k: tuple(v) for k, v in out.items()}
