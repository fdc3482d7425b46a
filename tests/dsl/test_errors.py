"""Mistakes users make, each reported with the right message at the right line and column."""

from __future__ import annotations

import pytest

from ragraph.dsl import load, parse
from ragraph.errors import WorkflowError

HEAD = 'input question\n'
NODE = 'generate a -> answer: "{question}"\n'
FLOW = "flow:\n    start -> a -> end\n"

# (name, source, line, column, message fragment, hint fragment or None)
CASES = [
    ("missing colon", HEAD + 'generate a -> answer "{question}"\n',
     2, 22, """unexpected '"{question}"', expected '(', '+=', ':' or '['""", None),
    ("unterminated string", HEAD + 'generate a -> answer: "{question}\n',
     2, 23, "unterminated string", "ends on the line it starts"),
    ("unterminated block", HEAD + 'generate a -> answer:\n    """\n    {question}\n',
     3, 5, 'unterminated """ string', None),
    ("single quotes", HEAD + "generate a -> answer (stop = ['x']): \"{question}\"\n",
     2, 31, "strings are written in double quotes", None),
    ("undefined hole", HEAD + 'generate a -> answer: "Q: {questoin}"\n',
     2, 28, "undefined variable 'questoin'", "did you mean 'question'?"),
    ("undefined hole in a block", HEAD + 'generate a -> answer:\n    """\n    Q: {question}\n'
     '      Docs: {doc}\n    """\n', 5, 14, "undefined variable 'doc'", None),
    ("unclosed brace", HEAD + 'generate a -> answer: "{question"\n',
     2, 24, "unclosed '{' in template", "'{{'"),
    ("undefined in condition", HEAD + NODE + FLOW + '    a -> a if answr == "x" loop max 2\n',
     5, 15, "undefined variable 'answr'", "did you mean 'answer'?"),
    ("condition syntax", HEAD + NODE + FLOW + "    a -> a if answer == loop max 2\n",
     5, 24, "expected a value, found end of condition", None),
    ("bad regex", HEAD + NODE + FLOW + '    a -> a if answer matches "(" loop max 2\n',
     5, 22, "invalid regular expression", None),
    ("unknown node", HEAD + NODE + "flow:\n    start -> a -> b -> end\n",
     4, 19, "unknown node 'b'", None),
    ("misspelt node", HEAD + NODE + "flow:\n    start -> aa -> end\n",
     4, 14, "unknown node 'aa'", "did you mean 'a'?"),
    ("duplicate node", HEAD + NODE + NODE, 3, 10, "duplicate node id 'a'", "first declared on line 2"),
    ("duplicate input", HEAD + HEAD + NODE, 2, 7, "input 'question' is declared twice", None),
    ("unreachable node", HEAD + NODE + 'generate b -> other: "{question}"\n' + FLOW
     + "    b -> end\n", 3, 10, "node 'b' is unreachable from start", None),
    ("cannot reach end", HEAD + NODE + 'generate b -> other: "{question}"\n'
     'generate c -> more: "{question}"\n' + FLOW + '    a -> b if answer == "x"\n'
     "    b -> c\n    c -> b\n", 3, 10, "node 'b' can never reach end", None),
    ("loop without bound", HEAD + NODE + FLOW + '    a -> a if answer == "x" loop\n',
     5, 29, "a loop needs an iteration bound", "loop max"),
    ("back edge not a loop", HEAD + NODE + FLOW + '    a -> a if answer == "x"\n',
     5, 7, "loop a -> a has no iteration bound", "loop max 3"),
    ("loop bound zero", HEAD + NODE + FLOW + "    a -> a loop max 0\n",
     5, 21, "a loop bound must be at least 1", None),
    ("query holds passages", HEAD + "retrieve r -> docs:\n    query = question\n"
     "retrieve s -> more:\n    query = docs\n" + 'generate a -> answer: "{more}"\n',
     4, 10, "retrieval 's' queries with 'docs', which holds passages, not text", None),
    ("unknown option", HEAD + 'generate a -> answer (max_tokenz = 3): "{question}"\n',
     2, 23, "unknown generate option 'max_tokenz'", "did you mean 'max_tokens'?"),
    ("option type", HEAD + 'retrieve r -> docs (topk = "x"):\n    query = question\n' + NODE,
     2, 28, "topk must be an integer in 1..1000, got 'x'", None),
    ("option range", HEAD + 'generate a -> answer (max_tokens = 0): "{question}"\n',
     2, 36, "max_tokens must be an integer in 1..32768", None),
    ("option twice", HEAD + 'generate a -> answer (seed = 1, seed = 2): "{question}"\n',
     2, 33, "option 'seed' is given twice", None),
    ("guard on a chain", HEAD + NODE + "flow:\n    start -> a -> end if answer\n",
     4, 26, "a condition or loop applies to one arrow", "`a -> end`"),
    ("edge out of end", HEAD + NODE + FLOW + "    end -> a\n",
     5, 5, "end has no outgoing edges", None),
    ("edge into start", HEAD + NODE + FLOW + "    a -> start\n",
     5, 10, "no edge can lead into start", None),
    ("keyword id", HEAD + 'generate flow -> answer: "{question}"\n',
     2, 10, "'flow' is a keyword and cannot name a node", None),
    ("reserved id", HEAD + 'generate End -> answer: "{question}"\n',
     2, 10, "'End' is reserved and cannot name a node", None),
    ("node not in flow", HEAD + NODE + 'generate b -> x: "{question}"\n' + FLOW,
     3, 10, "node 'b' never runs: no flow line mentions it", None),
    ("no plain edge", HEAD + NODE + 'flow:\n    start -> a\n    a -> end if answer == "x"\n',
     2, 10, "node 'a' has no unconditional next edge", "-> end"),
    ("second flow", HEAD + NODE + FLOW + FLOW, 5, 1, "a second `flow:` section", "line 3"),
    ("list default", "input question = [1]\n", 1, 18,
     """unexpected '[', expected a "string", a number or true or false""", None),
    ("stray character", HEAD + "generate a -> answer: %\n", 2, 23,
     """unexpected '%', expected a \"\"\"prompt\"\"\", a "string" or end of line""", None),
    ("end of file", HEAD + "generate a -> answer", 2, 21, "unexpected end of line", None),
    ("may be unset", HEAD + 'generate a -> draft: "{question}"\ngenerate b -> answer: "{draft}"\n'
     'flow:\n    start -> b -> end\n    b -> a if answer == "x"\n    a -> end\n',
     3, 10, "variable 'draft' may be unset when node 'b' runs", None),
]


@pytest.mark.parametrize(("name", "source", "line", "col", "message", "hint"), CASES,
                         ids=[c[0] for c in CASES])
def test_mistake_is_located(name, source, line, col, message, hint):
    assert_located(source, line, col, message, hint)


def assert_located(source: str, line: int, col: int, message: str, hint: str | None) -> None:
    """`source` fails to parse with `message` (and `hint`) at wf.rag:line:col, shown with the
    line and a caret."""
    with pytest.raises(WorkflowError) as caught:
        parse(source, file="wf.rag")
    err = caught.value
    assert err.message.startswith(message) or message in err.message, err.render()
    assert (err.span.line, err.span.col) == (line, col), err.render()
    if hint is not None:
        assert hint in (err.hint or ""), err.render()
    rendered = str(err).splitlines()
    assert rendered[0].startswith(f"wf.rag:{line}:{col}: error: ")
    assert rendered[1] == "  " + source.splitlines()[line - 1]
    assert rendered[2] == "  " + " " * (col - 1) + "^"


def test_at_least_fifteen_distinct_messages():
    assert len({c[4] for c in CASES}) >= 15


def test_errors_chain_their_cause():
    with pytest.raises(WorkflowError) as caught:
        parse("input question\ngenerate a -> answer\n")
    assert caught.value.__cause__ is not None


def test_load_names_the_file(tmp_path):
    path = tmp_path / "w.rag"
    path.write_text(HEAD + 'generate a -> answer: "{nope}"\n', encoding="utf-8")
    with pytest.raises(WorkflowError, match=r"w\.rag:2:25: error: undefined variable 'nope'"):
        load(path)


def test_non_text_source():
    with pytest.raises(WorkflowError, match="a .rag source is text"):
        parse(b"input question")  # type: ignore[arg-type]
