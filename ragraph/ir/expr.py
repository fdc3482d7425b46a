"""The safe condition language of conditional and loop edges.

    expr    := or
    or      := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | compare
    compare := atom (OP atom)?        OP: == != < <= > >= contains matches in
    atom    := NUMBER | STRING | true | false | NAME | NAME "(" [expr ("," expr)*] ")" | "(" expr ")"

Functions: len(x), lower(x), upper(x), trim(x), number(x), confidence(x). User text is parsed into
these dataclasses and interpreted; it never reaches eval or exec.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from ragraph.errors import WorkflowError
from ragraph.ir.values import Passages, Value

KEYWORDS = frozenset({"and", "or", "not", "true", "false", "contains", "matches", "in"})
COMPARE_OPS = ("==", "!=", "<=", ">=", "<", ">", "contains", "matches", "in")
FUNCTIONS = {"len": 1, "lower": 1, "upper": 1, "trim": 1, "number": 1, "confidence": 1}
# Deepest nesting of parentheses and `not`: keeps the recursive-descent parser far from Python's
# recursion limit whatever text it is given.
MAX_DEPTH = 50


class ExprError(WorkflowError):
    """A malformed condition, or one that failed on a request's values; `offset` is 0-based."""

    def __init__(self, message: str, offset: int = 0, hint: str | None = None) -> None:
        self.offset = offset
        super().__init__(message, hint=hint)


@dataclass(frozen=True)
class Literal:
    value: str | int | float | bool


@dataclass(frozen=True)
class Var:
    name: str
    # Where the name was written: for error messages only, so the same condition written with
    # different spacing (or printed by `to_source`) is still equal.
    offset: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    operand: Expr


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" | "or"
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Compare:
    op: str
    left: Expr
    right: Expr


Expr = Literal | Var | Call | Not | BoolOp | Compare

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>\d+(?:\.\d+)?)
    | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op>==|!=|<=|>=|<|>|\(|\)|,)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Tok:
    kind: str  # num | str | name | op | end
    text: str
    offset: int


def _tokenize(text: str) -> list[_Tok]:
    toks, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            bad = pos + len(text[pos:]) - len(text[pos:].lstrip())
            raise ExprError(f"unexpected character {text[bad]!r} in condition", bad)
        kind = m.lastgroup or "op"
        toks.append(_Tok(kind, m.group(kind), m.start(kind)))
        pos = m.end()
    toks.append(_Tok("end", "", len(text)))
    return toks


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokenize(text)
        self.i = 0
        self.depth = 0

    def nested(self, tok: _Tok) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"condition nested more than {MAX_DEPTH} levels deep", tok.offset)

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok.kind in ("op", "name") and tok.text == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            tok = self.peek()
            found = "end of condition" if tok.kind == "end" else repr(tok.text)
            raise ExprError(f"expected {text!r}, found {found}", tok.offset)

    def parse(self) -> Expr:
        if self.peek().kind == "end":
            raise ExprError("empty condition", 0)
        expr = self.boolean("or")
        tok = self.peek()
        if tok.kind != "end":
            raise ExprError(f"unexpected {tok.text!r} after a complete condition", tok.offset)
        return expr

    def boolean(self, op: str) -> Expr:
        sub = (lambda: self.boolean("and")) if op == "or" else self.negation
        operands = [sub()]
        while self.accept(op):
            operands.append(sub())
        return operands[0] if len(operands) == 1 else BoolOp(op, tuple(operands))

    def negation(self) -> Expr:
        tok = self.peek()
        if self.accept("not"):
            self.nested(tok)
            inner = self.negation()
            self.depth -= 1
            return Not(inner)
        return self.compare()

    def compare(self) -> Expr:
        left = self.atom()
        tok = self.peek()
        if tok.kind in ("op", "name") and tok.text in COMPARE_OPS:
            self.take()
            right = self.atom()
            if tok.text == "matches":
                _check_regex(right, tok.offset)
            return Compare(tok.text, left, right)
        return left

    def atom(self) -> Expr:
        tok = self.take()
        if tok.kind == "num":
            return Literal(float(tok.text) if "." in tok.text else int(tok.text))
        if tok.kind == "str":
            return Literal(_unquote(tok.text))
        if tok.kind == "op" and tok.text == "(":
            self.nested(tok)
            inner = self.boolean("or")
            self.expect(")")
            self.depth -= 1
            return inner
        if tok.kind == "name" and tok.text in ("true", "false"):
            return Literal(tok.text == "true")
        if tok.kind == "name" and tok.text not in KEYWORDS:
            if self.accept("("):
                return self.call(tok)
            return Var(tok.text, tok.offset)
        found = "end of condition" if tok.kind == "end" else repr(tok.text)
        raise ExprError(f"expected a value, found {found}", tok.offset)

    def call(self, name: _Tok) -> Call:
        if name.text not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            raise ExprError(f"unknown function {name.text!r}", name.offset, f"known: {known}")
        args: list[Expr] = []
        if not self.accept(")"):
            args.append(self.boolean("or"))
            while self.accept(","):
                args.append(self.boolean("or"))
            self.expect(")")
        if len(args) != FUNCTIONS[name.text]:
            raise ExprError(
                f"{name.text}() takes {FUNCTIONS[name.text]} argument, got {len(args)}", name.offset
            )
        if name.text == "confidence" and not isinstance(args[0], Var):
            raise ExprError("confidence() takes a variable written by a generation", name.offset)
        return Call(name.text, tuple(args))


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


def _unquote(text: str) -> str:
    """Python-like: \\n \\t \\\\ \\" \\' are escapes; any other backslash is kept, so a regex
    such as "^\\s*yes" means what it says."""
    body = text[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), body)


def _check_regex(node: Expr, offset: int) -> None:
    if isinstance(node, Literal) and isinstance(node.value, str):
        try:
            re.compile(node.value)
        except re.error as err:
            raise ExprError(f"invalid regular expression: {err}", offset) from err


def parse_expr(text: str) -> Expr:
    """Parse a condition; raises ExprError with the 0-based offset of the mistake."""
    return _Parser(text).parse()


def variables(expr: Expr) -> frozenset[str]:
    """The request variables a condition reads."""
    match expr:
        case Var(name=name):
            return frozenset({name})
        case Call(args=args):
            return frozenset().union(*(variables(a) for a in args))
        case Not(operand=op):
            return variables(op)
        case BoolOp(operands=ops):
            return frozenset().union(*(variables(o) for o in ops))
        case Compare(left=left, right=right):
            return variables(left) | variables(right)
    return frozenset()


def var_offsets(expr: Expr) -> tuple[Var, ...]:
    """Every variable reference with its offset, in source order (for located errors)."""
    match expr:
        case Var():
            return (expr,)
        case Call(args=args) | BoolOp(operands=args):
            return tuple(v for a in args for v in var_offsets(a))
        case Not(operand=op):
            return var_offsets(op)
        case Compare(left=left, right=right):
            return var_offsets(left) + var_offsets(right)
    return ()


def evaluate(expr: Expr, state: Mapping[str, Value]) -> Value:
    """Interpret a condition over a request's variables."""
    match expr:
        case Literal(value=value):
            return value
        case Var(name=name, offset=offset):
            if name not in state:
                raise ExprError(f"variable {name!r} is not set", offset)
            return state[name]
        case Not(operand=op):
            return not truthy(evaluate(op, state))
        case BoolOp(op="and", operands=ops):
            return all(truthy(evaluate(o, state)) for o in ops)
        case BoolOp(operands=ops):
            return any(truthy(evaluate(o, state)) for o in ops)
        case Call(func=func, args=args):
            return _call(func, args, state)
        case Compare(op=op, left=left, right=right):
            return _compare(op, evaluate(left, state), evaluate(right, state))
    raise TypeError(f"not an expression: {expr!r}")


def truthy(value: Value) -> bool:
    if isinstance(value, str):
        return value.strip() != ""
    return bool(len(value)) if isinstance(value, Passages) else bool(value)


def _call(func: str, args: tuple[Expr, ...], state: Mapping[str, Value]) -> Value:
    if func == "confidence":
        return float(getattr(evaluate(args[0], state), "min_prob", 1.0))
    value = evaluate(args[0], state)
    if func == "len":
        return len(value) if isinstance(value, str | Passages) else len(str(value))
    if func == "number":
        found = re.search(r"-?\d+(?:\.\d+)?", str(value))
        return float(found.group()) if found else 0.0
    text = str(value)
    return {"lower": text.lower, "upper": text.upper, "trim": text.strip}[func]()


def _compare(op: str, left: Value, right: Value) -> bool:
    if op == "contains":
        if isinstance(left, Passages):
            return any(str(right) in f"{p.title} {p.text}" for p in left)
        return str(right) in str(left)
    if op == "in":
        return _compare("contains", right, left)
    if op == "matches":
        return re.search(str(right), str(left)) is not None
    if op in ("==", "!="):
        equal = _coerce(left, right) == _coerce(right, left)
        return equal if op == "==" else not equal
    a, b = _coerce(left, right), _coerce(right, left)
    if type(a) is not type(b) and not (_is_num(a) and _is_num(b)):
        raise ExprError(f"cannot compare {type(a).__name__} with {type(b).__name__} using {op}")
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _is_num(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _coerce(value: Value, other: Value) -> Value:
    """Text compared with a number is read as a number when it is one (model output is text)."""
    if isinstance(value, str) and _is_num(other):
        try:
            return float(value.strip())
        except ValueError:
            return value
    return value


def to_source(expr: Expr) -> str:
    """Canonical text of a condition (fully parenthesized where precedence needs it)."""
    match expr:
        case Literal(value=bool(b)):
            return "true" if b else "false"
        case Literal(value=str(s)):
            return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
        case Literal(value=float(f)):
            return _float_source(f)
        case Literal(value=v):
            return repr(v)
        case Var(name=name):
            return name
        case Call(func=func, args=args):
            return f"{func}({', '.join(to_source(a) for a in args)})"
        case Not(operand=op):
            return f"not {_wrap(op)}"
        case BoolOp(op=op, operands=ops):
            return f" {op} ".join(_wrap(o) for o in ops)
        case Compare(op=op, left=left, right=right):
            return f"{_wrap(left)} {op} {_wrap(right)}"
    raise TypeError(f"not an expression: {expr!r}")


def _float_source(value: float) -> str:
    """Positional notation (`0.00001`, not `1e-05`): the condition language has no exponents."""
    text = format(Decimal(repr(value)), "f")
    return text if "." in text else text + ".0"


def _wrap(expr: Expr) -> str:
    text = to_source(expr)
    return f"({text})" if isinstance(expr, BoolOp | Compare) else text
