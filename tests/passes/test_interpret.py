"""The one interpreter: every unit kind a request can enter has its handler, and an executor
that overrides only its engine calls computes what the reference computes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest

from ragraph.ir import nodes, overlap, stages
from ragraph.ir.nodes import START
from ragraph.ir.values import GeneratedText
from ragraph.passes import compile
from ragraph.passes.reference import FakeEngines, walk
from ragraph.program.interpret import HANDLERS, Interpreter, run_sync
from tests.passes.graphs import BUILDERS


def _walked_kinds() -> set[str]:
    """Every node class a workflow's walk can enter (side nodes, like prefetch, never are)."""
    classes = [c for m in (nodes, overlap, stages) for c in vars(m).values()
               if isinstance(c, type) and issubclass(c, nodes.Node) and c is not nodes.Node]
    return {c.kind for c in classes if c.in_control_flow} - {"node"}  # "node": abstract


def test_every_unit_kind_has_one_handler_method():
    assert _walked_kinds() <= set(HANDLERS)
    for method in HANDLERS.values():
        assert callable(getattr(Interpreter, method))


class _Counting(Interpreter):
    """Engines that count their calls, searching and generating as the reference does."""

    def __init__(self, program, engines: FakeEngines) -> None:  # noqa: ANN001
        super().__init__(program)
        self.engines, self.calls = engines, 0

    async def complete(self, chain, req, prompt, branch):  # noqa: ANN001
        self.calls += 1
        return GeneratedText(self.engines.generate(prompt), 1.0)

    async def search(self, chain, req, query, branch):  # noqa: ANN001
        self.calls += 1
        return self.engines.retrieve(query, chain.topk)


@dataclass
class _Request:
    variables: dict
    node: str = START
    loop_counts: Counter[int] = field(default_factory=Counter)
    rendered: dict = field(default_factory=dict)  # a split chain's rendering, by origin
    path: list = field(default_factory=list)


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("passes", ["-O0", "-O2"])
def test_a_subclass_overriding_only_its_engines_assigns_what_the_reference_does(name, passes):
    compiled = compile(BUILDERS[name](), passes)
    question = {"question": "Who wrote the first compiler?"}
    expected = {e.var: e.value for e in walk(compiled.graph, question)}
    inputs = {i.name: i.default for i in compiled.graph.inputs.values() if i.default is not None}
    req = _Request({**inputs, **question})
    counting = _Counting(compiled.program, FakeEngines())
    run_sync(counting.run(req))
    assert {k: req.variables[k] for k in expected} == expected
    assert counting.calls > 0


class _Pending:
    def __await__(self):  # noqa: ANN204 -- what an engine's future does: suspend
        yield


async def _waits() -> None:
    await _Pending()


def test_run_sync_refuses_a_coroutine_that_really_waits():
    with pytest.raises(RuntimeError, match="awaited real work"):
        run_sync(_waits())


def test_a_split_chains_rendering_waits_on_the_request_not_the_interpreter():
    """The interpreter keeps no request state: the prompt a prefill rendered waits on the
    request until its finish, so one instance runs many requests at once."""
    program = compile(BUILDERS["hyde"](), "-O2").program
    prefill = next(u for u in program.units.values() if u.kind == "prefill")
    finish = program.units[program.last[prefill.origin]]
    counting = _Counting(program, FakeEngines())
    first, second = (_Request({"question": q}) for q in ("Who wrote it?", "When was it?"))
    for req in (first, second):
        assert counting.dispatch(prefill, req) is None
    assert first.rendered[prefill.origin] != second.rendered[prefill.origin]
    assert "rendered" not in vars(counting)
    run_sync(counting.run_unit(finish, first))
    assert prefill.origin not in first.rendered and prefill.origin in second.rendered
