"""The `.rag` workflow language: `parse(text)` and `load(path)` give a verified RAGraph;
`to_rag(graph)` writes one back.

Every mistake, from a stray character to a node that can never reach `end`, is a
`ragraph.errors.WorkflowError` located at `file:line:col`; nothing else escapes `parse`.
"""

from __future__ import annotations

from pathlib import Path

from lark.exceptions import UnexpectedInput, VisitError

from ragraph import workflows
from ragraph.dsl import ast
from ragraph.dsl.lower import lower
from ragraph.dsl.printer import to_rag
from ragraph.dsl.syntax_errors import syntax_error
from ragraph.dsl.transformer import ToAst, literal_terminals, parser
from ragraph.errors import WorkflowError
from ragraph.ir import RAGraph

__all__ = ["load", "parse", "parse_ast", "to_rag"]


def parse(text: str, file: str | None = None) -> RAGraph:
    """A verified RAGraph from `.rag` text; `file` names it in error messages."""
    if not isinstance(text, str):
        raise WorkflowError(f"a .rag source is text, got {type(text).__name__}")
    source = _normalized(text)
    try:
        graph = lower(parse_ast(source, file))
        graph.verify()
    except WorkflowError as err:
        raise err.located(None, source) from err
    return graph


def load(path: str | Path) -> RAGraph:
    """Read and parse a `.rag` file, or a shipped workflow by name (`hyde`) where no such file
    is; errors name the file."""
    path = Path(path)
    if not path.exists():
        path = workflows.shipped(str(path)) or path
    try:
        text = path.read_text(encoding="utf-8-sig")  # editors on Windows add a BOM
    except (OSError, UnicodeDecodeError) as err:
        hint = ("" if path.exists() else
                f" (the shipped workflows, by name: {', '.join(workflows.names())})")
        raise WorkflowError(f"cannot read workflow {str(path)!r}: {err}{hint}") from err
    return parse(text, file=str(path))


def parse_ast(source: str, file: str | None = None) -> ast.Module:
    """The syntax tree of normalized source (line ends `\\n`, a final newline)."""
    try:
        tree = parser().parse(source)
    except UnexpectedInput as err:
        raise syntax_error(err, source, file, literal_terminals()) from err
    try:
        return ToAst(file).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, WorkflowError):
            raise err.orig_exc from err
        raise


def _normalized(text: str) -> str:
    text = text.replace("\r\n", "\n")
    return text if text.endswith("\n") else text + "\n"
