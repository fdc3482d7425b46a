"""Lowering: a `.rag` AST becomes a RAGraph with a source span on every input, node and edge.

Order of work: workflow name, inputs, nodes (templates and options checked where written), the
names every template reads, then the flow. The IR verifier runs afterwards (in `parse`), and its
errors point into the file through the spans set here.
"""

from __future__ import annotations

from ragraph.dsl import ast
from ragraph.dsl.checks import check_defined, check_node_id, hole_spans, resolve_ref, var_spans
from ragraph.dsl.fanout import Scope, bound_of, check_bindings, check_merge, check_names
from ragraph.dsl.options import generate_options, merge_options, retrieve_options
from ragraph.errors import Span, WorkflowError
from ragraph.ir import END, START, Binding, Condition, RAGraph, Template
from ragraph.ir.expr import ExprError
from ragraph.ir.nodes import End, Start
from ragraph.ir.template import TemplateError

NodeDecl = ast.NodeDecl


def lower(module: ast.Module) -> RAGraph:
    graph = RAGraph(_workflow_name(module))
    _add_inputs(graph, module)
    nodes = [d for d in module.decls if isinstance(d, NodeDecl)]
    if not nodes:
        raise _no_nodes(module)
    node_ids = _node_ids(nodes)
    scope = Scope.of(graph.inputs, nodes)
    for decl in nodes:  # before any template: a bad item name would confuse their checks
        if not isinstance(decl, ast.MergeDecl):
            check_bindings(decl, scope)
    for decl in nodes:
        _add_node(graph, decl, scope)
    _add_flow(graph, module, nodes, node_ids, scope)
    return graph


def _no_nodes(module: ast.Module) -> WorkflowError:
    # Without a node the graph is START -> END: it would verify, print "ok (0 nodes)", and give
    # every request an empty answer (the wavefront executor never finished one at all).
    return WorkflowError("no workflow: the file defines no nodes", span=Span(1, 1, file=module.file),
                         hint='declare at least one node, e.g. '
                         '`generate answer -> answer: "{question}"`')


def _add_inputs(graph: RAGraph, module: ast.Module) -> None:
    for decl in module.decls:
        if not isinstance(decl, ast.InputDecl):
            continue
        default = None if decl.default is None else decl.default.value
        if isinstance(default, tuple):
            raise WorkflowError("an input default is a string, number, true or false, not a list",
                                span=decl.default.span)  # type: ignore[union-attr]
        graph.add_input(decl.name.text, default, span=decl.name.span)


def _add_flow(graph: RAGraph, module: ast.Module, nodes: list[NodeDecl],
              node_ids: dict[str, Span], scope: Scope) -> None:
    flows = [d for d in module.decls if isinstance(d, ast.FlowDecl)]
    if len(flows) > 1:
        raise WorkflowError("a second `flow:` section", span=flows[1].keyword,
                            hint=f"put every edge in the one on line {flows[0].keyword.line}")
    # START/END errors ("start has no next edge") point at the flow section, or the file's top.
    anchor = flows[0].keyword if flows else Span(1, 1, file=module.file)
    graph.replace_node(Start(id=START, span=anchor))
    graph.replace_node(End(id=END, span=anchor))
    if not flows:
        _add_declaration_order(graph, nodes)
        return
    for line in flows[0].lines:
        _add_line(graph, line, node_ids, scope)
    _check_all_in_flow(graph, nodes)


def _workflow_name(module: ast.Module) -> str:
    names = [d.name for d in module.decls if isinstance(d, ast.WorkflowDecl)]
    if len(names) > 1:
        raise WorkflowError("the workflow is named twice", span=names[1].span,
                            hint=f"it is already named {names[0].text!r} on line {names[0].span.line}")
    return names[0].text if names else "workflow"


def _node_ids(nodes: list[NodeDecl]) -> dict[str, Span]:
    seen: dict[str, Span] = {}
    for decl in nodes:
        check_node_id(decl.id)
        if decl.id.text in seen:
            raise WorkflowError(f"duplicate node id {decl.id.text!r}", span=decl.id.span,
                                hint=f"first declared on line {seen[decl.id.text].line}")
        seen[decl.id.text] = decl.id.span
    return seen


def _add_node(graph: RAGraph, decl: NodeDecl, scope: Scope) -> None:
    """Add the node, once the names its template reads are checked where they are written."""
    if isinstance(decl, ast.MergeDecl):
        method = check_merge(decl, scope)
        graph.add_merge(decl.id.text, method, decl.input.text, decl.output.text,
                        span=decl.id.span, **merge_options(decl.options, method))
        return
    where = decl.prompt if isinstance(decl, ast.GenerateDecl) else decl.query
    own = frozenset(b.item.text for b in decl.each)
    template = _checked(where, scope, own)
    each = tuple(Binding(b.item.text, b.over.text) for b in decl.each)
    if isinstance(decl, ast.GenerateDecl):
        chat = decl.chat
        system = chat.system if chat is not None else None
        options = generate_options(decl.options, chat)
        if chat is not None:
            options["chat"] = True
        graph.add_generation(decl.id.text, template, decl.output.text, append=decl.append,
                             items=bound_of(decl), each=each, span=decl.id.span,
                             system=None if system is None else _checked(system, scope, own),
                             **options)
    else:
        graph.add_retrieval(decl.id.text, query=template, output=decl.output.text, each=each,
                            span=decl.id.span, **retrieve_options(decl.options))


def _checked(where: ast.Text | ast.Name, scope: Scope, own: frozenset[str]) -> Template:
    """A prompt, query or message as a template whose every hole names a known variable."""
    template = Template.variable(where.text) if isinstance(where, ast.Name) else _template(where)
    check_names(hole_spans(template, where), scope, own)
    check_defined(hole_spans(template, where), set(scope.defined | own))
    return template


def _template(text: ast.Text) -> Template:
    try:
        return Template.parse(text.value)
    except TemplateError as err:
        raise WorkflowError(err.message, span=text.at(err.offset), hint=err.hint) from err


def _add_line(graph: RAGraph, line: ast.FlowLine, node_ids: dict[str, Span],
              scope: Scope) -> None:
    ids = [resolve_ref(ref, node_ids) for ref in line.refs]
    for i, (ref, nid) in enumerate(zip(line.refs, ids, strict=True)):
        _check_endpoint(ref, nid, first=i == 0, last=i == len(ids) - 1)
    guard = line.guard
    if guard is not None and len(ids) > 2:
        raise WorkflowError(
            "a condition or loop applies to one arrow", span=_guard_span(guard),
            hint=f"give `{line.refs[-2].text} -> {line.refs[-1].text}` a line of its own",
        )
    condition = None if guard is None else _condition(guard, scope)
    bound = None if guard is None else _loop_bound(guard)
    for i, arrow in enumerate(line.arrows):
        graph.add_edge(ids[i], ids[i + 1], when=condition, max_iters=bound, span=arrow)


def _check_endpoint(ref: ast.Name, nid: str, first: bool, last: bool) -> None:
    if nid == END and not last:
        raise WorkflowError("end has no outgoing edges", span=ref.span,
                            hint="a request stops when it reaches end")
    if nid == START and not first:
        raise WorkflowError("no edge can lead into start", span=ref.span,
                            hint="to run a node again, loop back to it: `b -> a loop max 3`")


def _guard_span(guard: ast.Guard) -> Span:
    if guard.condition is not None:
        return guard.condition.span
    return guard.loop  # type: ignore[return-value]  # a guard has a condition or a loop


def _condition(guard: ast.Guard, scope: Scope) -> Condition | None:
    if guard.condition is None:
        return None
    text = guard.condition
    try:
        condition = Condition.parse(text.value)
    except ExprError as err:
        raise WorkflowError(err.message, span=text.at(err.offset), hint=err.hint) from err
    names = var_spans(condition.expr, text)  # type: ignore[arg-type]
    check_names(names, scope)
    check_defined(names, set(scope.defined))
    return condition


def _loop_bound(guard: ast.Guard) -> int | None:
    if guard.loop is None:
        return None
    if guard.bound is None:
        raise WorkflowError("a loop needs an iteration bound", span=guard.loop,
                            hint="write `loop max N`, e.g. `loop max 3`")
    if guard.bound.value < 1:  # type: ignore[operator]
        raise WorkflowError("a loop bound must be at least 1", span=guard.bound.span)
    return guard.bound.value  # type: ignore[return-value]


def _check_all_in_flow(graph: RAGraph, nodes: list[NodeDecl]) -> None:
    for decl in nodes:
        if not graph.in_edges(decl.id.text) and not graph.out_edges(decl.id.text):
            raise WorkflowError(f"node {decl.id.text!r} never runs: no flow line mentions it",
                                span=decl.id.span,
                                hint=f"mention it in a flow line, e.g. `... -> {decl.id.text} -> ...`")


def _add_declaration_order(graph: RAGraph, nodes: list[NodeDecl]) -> None:
    """Without `flow:`, the nodes run one after another in the order they are declared."""
    order = [START, *(d.id.text for d in nodes), END]
    spans = [None, *(d.id.span for d in nodes), None]
    for i in range(len(order) - 1):
        graph.add_edge(order[i], order[i + 1], span=spans[i + 1] or spans[i])
