"""What the language accepts and what it means."""

from __future__ import annotations

from ragraph.dsl import parse
from ragraph.ir import END, START, EdgeKind


def edges(graph):
    return [(e.src, e.dst, e.kind) for e in graph.edges()]


def test_without_flow_nodes_run_in_declaration_order():
    graph = parse('input question\nretrieve r -> docs:\n    query = question\n'
                  'generate a -> answer: "{docs} {question}"\n')
    assert edges(graph) == [(START, "r", EdgeKind.NEXT), ("r", "a", EdgeKind.NEXT),
                            ("a", END, EdgeKind.NEXT)]
    assert graph.name == "workflow"


def test_comments_blank_lines_crlf_and_no_final_newline():
    text = ("# title\r\n\r\nworkflow w   # name\r\n  # indented comment\r\ninput question # q\r\n"
            'generate a -> answer:   # the prompt follows\r\n    "{question}"  # done\r\n'
            "flow:  # edges\r\n\r\n    start -> a -> end # last")
    graph = parse(text)
    assert graph.name == "w" and graph.node("a").prompt.text == "{question}"


def test_block_prompts_are_trimmed_and_dedented():
    graph = parse('input question\ngenerate a -> answer:\n    """\n    Q: {question}\n'
                  '      indented\n\n    A:\n\n    """\n')
    assert graph.node("a").prompt.text == "Q: {question}\n  indented\n\nA:\n"


def test_inline_block_and_escapes():
    graph = parse('input question\ngenerate a -> answer (stop = "\\n"): """{question} "x" \\n"""\n')
    node = graph.node("a")
    assert node.prompt.text == '{question} "x" \\n'  # triple-quoted text is literal
    assert node.sampling.stop == ("\n",)


def test_append_inputs_and_integer_ids():
    graph = parse('input question\ninput n = -2.5e1\ninput notes = ""\ninput on = true\n'
                  'generate 0 -> notes += (max_tokens = 8): "{question}"\n'
                  'generate 1 -> answer: "{notes}"\nflow:\n    start -> 0 -> 1 -> END\n')
    assert graph.node("0").append and graph.inputs["n"].default == -25.0
    assert graph.inputs["on"].default is True and graph.inputs["notes"].default == ""
    assert edges(graph)[-1] == ("1", END, EdgeKind.NEXT)


def test_guards_make_conditional_and_loop_edges():
    graph = parse('input question\ngenerate a -> answer: "{question}"\nflow:\n'
                  "    start -> a -> end\n"
                  '    a -> a if answer matches "^\\s*again" and len(answer) < 9 loop max 2  # c\n'
                  '    a -> end if answer contains "# not a comment"\n')
    loop, cond = graph.out_edges("a")[1:]
    assert loop.kind == EdgeKind.LOOP and loop.max_iters == 2
    assert loop.condition.source == '(answer matches "^\\\\s*again") and (len(answer) < 9)'
    assert cond.kind == EdgeKind.COND and "# not a comment" in cond.condition.source


def test_keywords_are_names_where_unambiguous():
    graph = parse('input input\ngenerate query -> max: "{input}"\nretrieve loop -> if:\n'
                  "    query = max\ngenerate answer -> answer: \"{if}\"\n")
    assert graph.node("loop").query.text == "{max}"


def test_spans_point_at_declarations():
    graph = parse('input question\n\ngenerate a -> answer: "{question}"\n', file="w.rag")
    assert str(graph.node("a").span) == "w.rag:3:10"
    assert str(graph.inputs["question"].span) == "w.rag:1:7"
    assert all(e.span is not None for e in graph.edges())
