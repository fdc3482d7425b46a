"""The cached `.rag` parser and the Transformer from lark's parse tree to the AST (ast.py).

One short method per grammar rule; every AST piece carries the span of the tokens it came from.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from lark import Lark, Token, Transformer, v_args
from lark.lexer import PatternStr

from ragraph.dsl import ast
from ragraph.dsl.strings import decode_block, decode_string
from ragraph.errors import Span, WorkflowError

_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
# Python refuses to convert integers of more than 4300 digits; no option needs more than this.
_MAX_DIGITS = 30


@functools.cache
def parser() -> Lark:
    """The LALR parser for ragraph.lark, built once per process (building takes ~50 ms)."""
    grammar = resources.files("ragraph.dsl").joinpath("ragraph.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=True)


@functools.cache
def literal_terminals() -> dict[str, str]:
    """Terminal name -> text for keywords and punctuation (for "expected ..." messages)."""
    return {t.name: t.pattern.value for t in parser().terminals if isinstance(t.pattern, PatternStr)}


class ToAst(Transformer):
    """Builds ast.Module from a parse tree. Holds only the file name of the text it transforms."""

    def __init__(self, file: str | None) -> None:
        super().__init__()
        self.file = file

    # ----- helpers -------------------------------------------------------------------------------

    def span(self, tok: Token) -> Span:
        return Span(tok.line, tok.column, tok.end_line, tok.end_column, file=self.file)

    def name(self, tok: Token) -> ast.Name:
        return ast.Name(str(tok), self.span(tok))

    def check_length(self, tok: Token) -> None:
        if len(tok) > _MAX_DIGITS:
            raise WorkflowError(f"number too long ({len(tok)} characters)", span=self.span(tok))

    # ----- declarations --------------------------------------------------------------------------

    def start(self, decls: list) -> ast.Module:
        return ast.Module(tuple(decls), self.file)

    def workflow_decl(self, children: list) -> ast.WorkflowDecl:
        return ast.WorkflowDecl(self.name(children[0]))

    def input_decl(self, children: list) -> ast.InputDecl:
        name, default = children
        return ast.InputDecl(self.name(name), default)

    def generate_decl(self, children: list) -> ast.GenerateDecl:
        node, each, _arrow, output, bound, append, options, body = children
        chat = body if isinstance(body, ast.ChatBody) else None
        prompt = chat.user if chat is not None else body
        return ast.GenerateDecl(self.name(node), self.name(output), append is not None,
                                options or (), prompt, each or (), bound, chat)

    def chat(self, children: list) -> ast.ChatBody:
        _system, system, user_keyword, user = children
        return ast.ChatBody(self.span(user_keyword), user, system)

    def retrieve_decl(self, children: list) -> ast.RetrieveDecl:
        node, each, _arrow, output, options, query = children
        return ast.RetrieveDecl(self.name(node), self.name(output), options or (), query,
                                each or ())

    def merge_decl(self, children: list) -> ast.MergeDecl:
        node, _arrow, output, options, method, source = children
        return ast.MergeDecl(self.name(node), self.name(output), options or (),
                             self.name(method), self.name(source))

    # ----- fan-out -------------------------------------------------------------------------------

    def each(self, children: list) -> tuple[ast.Binding, ...]:
        return tuple(children)

    def binding(self, children: list) -> ast.Binding:
        item, _in, over = children
        return ast.Binding(self.name(item), self.name(over))

    @v_args(meta=True)
    def bound(self, meta, children: list) -> ast.Bound:  # noqa: ANN001 - lark's Meta
        (count,) = children
        span = Span(meta.line, meta.column, meta.end_line, meta.end_column, file=self.file)
        if count is None:
            return ast.Bound(span, None)
        self.check_length(count)
        return ast.Bound(span, ast.Value(int(count), self.span(count)))

    def name_ref(self, children: list) -> ast.Name:
        return self.name(children[0])

    # ----- options and values --------------------------------------------------------------------

    def options(self, children: list) -> tuple[ast.Option, ...]:
        return tuple(c for c in children if c is not None)

    def option(self, children: list) -> ast.Option:
        return ast.Option(self.name(children[0]), children[1])

    def list(self, children: list) -> ast.Value:
        items = [c for c in children if c is not None]
        first = items[0].span if items else Span(0, 0, file=self.file)
        return ast.Value(tuple(item.value for item in items), first)

    def scalar(self, children: list) -> ast.Value:
        tok = children[0]
        span = self.span(tok)
        if tok.type == "BOOL":
            return ast.Value(tok == "true", span)
        if tok.type == "NUMBER":
            self.check_length(tok)
            return ast.Value(int(tok) if _INTEGER.match(tok) else float(tok), span)
        return ast.Value(decode_string(str(tok), tok.line, tok.column, self.file).value, span)

    def text(self, children: list) -> ast.Text:
        tok = children[0]
        decode = decode_block if tok.type == "BLOCK" else decode_string
        return decode(str(tok), tok.line, tok.column, self.file)

    # ----- flow ----------------------------------------------------------------------------------

    def flow_decl(self, children: list) -> ast.FlowDecl:
        return ast.FlowDecl(self.span(children[0]), tuple(children[1:]))

    def flow_line(self, children: list) -> ast.FlowLine:
        guard = children[-1] if isinstance(children[-1], ast.Guard) else None
        parts = children[:-1] if guard else children
        refs = tuple(p for p in parts if isinstance(p, ast.Name))
        arrows = tuple(self.span(p) for p in parts if isinstance(p, Token))
        return ast.FlowLine(refs, arrows, guard)

    def ref(self, children: list) -> ast.Name:
        return self.name(children[0])

    def guard(self, children: list) -> ast.Guard:
        if isinstance(children[0], Token) and children[0].type == "IF":
            cond = self.condition(children[1])
            loop = children[2] if len(children) > 2 and children[2] else (None, None)
            return ast.Guard(cond, *loop)
        return ast.Guard(None, *children[0])

    def loop(self, children: list) -> tuple[Span, ast.Value | None]:
        keyword, _max, bound = children
        if bound is not None:
            self.check_length(bound)
        value = None if bound is None else ast.Value(int(bound), self.span(bound))
        return self.span(keyword), value

    def condition(self, tok: Token) -> ast.Text:
        text = str(tok).rstrip()
        positions = tuple((tok.line, tok.column + i) for i in range(len(text) + 1))
        span = Span(tok.line, tok.column, tok.line, tok.column + len(text), file=self.file)
        return ast.Text(text, span, positions)
