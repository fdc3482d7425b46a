"""A pure reference interpreter for compiled graphs, with every speculative edge declined.

`walk(graph, inputs)` runs one request through any graph (-O0 or optimized) with fake engines
(generation output = f(rendered prompt), one to four lines; retrieval = f(rendered query, topk))
and returns the effects on request variables, in order. A map renders one prompt or query per
branch and assigns the list of results; a merge combines a list (`ir.fanout`). Sub-stages do what the runtime does minus the engines:
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
from ragraph.ir.fanout import Binding, branch_states, merge, split_items
from ragraph.ir.graph import RAGraph
from ragraph.ir.nodes import END, START, Node
from ragraph.ir.stages import slot
from ragraph.ir.template import Template
from ragraph.ir.values import Items, Passage, Passages, Value
from ragraph.passes.analysis import straight_next


def fake_generate(prompt: str) -> str:
    """One to four lines (so list outputs have several items), a function of the prompt."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    lines = 1 + int(digest[-1], 16) % 4
    return "\n".join(f"gen-{digest[i * 10:i * 10 + 10]}" for i in range(lines))


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
    scratch: dict[str, object] = field(default_factory=dict)
    effects: list[Effect] = field(default_factory=list)

    def assign(self, node: str, var: str, value: Value, source: str, append: bool) -> None:
        # Same meaning as the runtime's apply_generation: append adds a line to non-empty text.
        if append and isinstance(value, str) and str(self.state.get(var, "")).strip():
            value = f"{str(self.state[var]).rstrip()}\n{value}"
        self.state[var] = value
        self.effects.append(Effect(node, var, value, source))

    def render(self, template: Template, each: tuple[Binding, ...], node: str,
               strip: bool) -> str | tuple[str, ...]:
        """The rendered text, or one per branch for a map."""
        def one(state: dict[str, Value]) -> str:
            text = template.render(state)
            return text.strip() if strip else text
        if not each:
            return one(self.state)
        return tuple(one(s) for s in branch_states(each, self.state, node))

    def generated(self, node: Node, prompt: str | tuple[str, ...]) -> Value:
        if isinstance(prompt, tuple):
            return Items(tuple(self.engines.generate(p) for p in prompt))
        text = self.engines.generate(prompt)
        items = getattr(node, "items", None)
        return split_items(text, items) if items else text

    def retrieved(self, query: str | tuple[str, ...], topk: int) -> Value:
        if isinstance(query, tuple):
            return Items(tuple(self.engines.retrieve(q, topk) for q in query))
        return self.engines.retrieve(query, topk)

    def run(self, node: Node) -> None:
        kind, n = node.kind, node  # `n` read through the fields its kind has
        origin = getattr(node, "origin", node.id)
        if kind == "generate":
            prompt = self.render(n.flat_prompt, n.each, node.id, strip=False)  # type: ignore[attr-defined]
            self.assign(origin, n.output, self.generated(node, prompt), str(prompt),  # type: ignore[attr-defined]
                        n.append)  # type: ignore[attr-defined]
        elif kind == "retrieve":
            query = self.render(n.query, n.each, node.id, strip=True)  # type: ignore[attr-defined]
            self.assign(origin, n.output, self.retrieved(query, n.topk), str(query), False)  # type: ignore[attr-defined]
        elif kind == "merge":
            value = merge(n.method, self.state[n.input], n.k, n.topk)  # type: ignore[attr-defined]
            self.assign(origin, n.output, value, repr(self.state[n.input]), False)  # type: ignore[attr-defined]
        elif kind == "embed-query":
            self.scratch[slot(origin, "qtext")] = self.render(n.query, n.each, origin, strip=True)  # type: ignore[attr-defined]
        elif kind == "prefill":
            self.scratch[slot(origin, "prompt")] = self.render(n.flat_prompt, n.each, origin,  # type: ignore[attr-defined]
                                                               strip=False)
        elif kind == "retrieve-commit":
            query = self.scratch[slot(origin, "qtext")]
            self.assign(origin, n.output, self.retrieved(query, n.topk), str(query), False)  # type: ignore[attr-defined, arg-type]
        elif kind == "finish":
            prompt = self.scratch[slot(origin, "prompt")]
            self.assign(origin, n.output, self.generated(node, prompt), str(prompt), n.append)  # type: ignore[attr-defined, arg-type]
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
