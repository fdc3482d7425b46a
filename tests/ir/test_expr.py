"""The safe condition language: precedence, operators, functions, errors with offsets."""

from __future__ import annotations

import pytest

from ragraph.ir.expr import (
    MAX_DEPTH,
    BoolOp,
    Compare,
    ExprError,
    Not,
    Var,
    evaluate,
    parse_expr,
    to_source,
    truthy,
    variables,
)
from ragraph.ir.values import GeneratedText, Passage, Passages


def holds(text: str, **state) -> bool:
    return truthy(evaluate(parse_expr(text), state))


def test_precedence_not_binds_tighter_than_and_than_or():
    expr = parse_expr("not a or b and c")
    assert isinstance(expr, BoolOp) and expr.op == "or"
    assert isinstance(expr.operands[0], Not) and expr.operands[1].op == "and"
    assert holds("not a or b and c", a=False, b=False, c=False)
    assert not holds("not (a or b) and c", a=False, b=False, c=False)


def test_comparison_binds_tighter_than_not():
    expr = parse_expr('not x == "y"')
    assert isinstance(expr, Not) and isinstance(expr.operand, Compare)


@pytest.mark.parametrize(("text", "state", "expected"), [
    ('answer contains "Paris"', {"answer": "It is Paris."}, True),
    ('"Paris" in answer', {"answer": "Paris"}, True),
    ('answer matches "^\\s*yes"', {"answer": "  Yes"}, False),
    ('answer matches "(?i)^\\s*yes"', {"answer": "  Yes"}, True),
    ("len(docs) >= 2", {"docs": Passages((Passage(1, "t", "x"), Passage(2, "u", "y")))}, True),
    ('docs contains "needle"', {"docs": Passages((Passage(1, "t", "a needle"),))}, True),
    ("len(answer) < 3", {"answer": "abcd"}, False),
    ("confidence(s) < 0.4", {"s": GeneratedText("x", min_prob=0.2)}, True),
    ("confidence(s) < 0.4", {"s": "no logprobs"}, False),
    ("n == 3", {"n": " 3 "}, True),  # model output compared with a number is read as one
    ("number(answer) > 2", {"answer": "about 2.5 km"}, True),
    ('lower(trim(a)) == "yes"', {"a": " YES "}, True),
    ("flag and not other", {"flag": True, "other": ""}, True),
])
def test_operators_and_functions(text, state, expected):
    assert holds(text, **state) is expected


@pytest.mark.parametrize(("text", "offset", "message"), [
    ("", 0, "empty condition"),
    ("a ==", 4, "expected a value"),
    ("a == b c", 7, "unexpected 'c'"),
    ("(a", 2, "expected ')'"),
    ("a % b", 2, "unexpected character '%'"),
    ("size(a)", 0, "unknown function 'size'"),
    ("len(a, b)", 0, "len() takes 1 argument"),
    ('a matches "("', 2, "invalid regular expression"),
    ('confidence("x")', 0, "confidence() takes a variable"),
    ("not " * (MAX_DEPTH + 1) + "a", 4 * MAX_DEPTH, "nested more than"),
])
def test_errors_carry_offsets(text, offset, message):
    with pytest.raises(ExprError) as caught:
        parse_expr(text)
    assert message in caught.value.message and caught.value.offset == offset


def test_runtime_errors_name_the_variable():
    with pytest.raises(ExprError, match="variable 'x' is not set"):
        evaluate(parse_expr("x"), {})
    with pytest.raises(ExprError, match="cannot compare"):
        evaluate(parse_expr("a < 1"), {"a": Passages()})


@pytest.mark.parametrize("text", [
    'not (a contains "x") or b == 1.5', "len(a) > 0.00001", 'a == "q\\"uote\\\\ \\n"',
    "a matches \"\\\\d+\"", "((a))", "a in b and (c or d)",
])
def test_to_source_round_trips(text):
    expr = parse_expr(text)
    assert parse_expr(to_source(expr)) == expr


def test_equality_ignores_where_variables_were_written():
    assert parse_expr("a  ==  b") == parse_expr("a == b")
    assert Var("a", 3) == Var("a", 7)
    assert variables(parse_expr("len(a) > 1 and b contains c")) == {"a", "b", "c"}
