"""Every name a module imports for its annotations only (`if TYPE_CHECKING:`) exists where it is
imported from: a rename (the merge of two branches, one renaming a class) otherwise leaves an
annotation naming nothing, which no run and no linter notices."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _type_only_imports() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted((ROOT / "ragraph").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
                found += [(str(path.relative_to(ROOT)), imp.module, alias.name)
                          for imp in node.body if isinstance(imp, ast.ImportFrom) and imp.module
                          for alias in imp.names]
    return found


def test_every_type_only_import_names_something_that_exists():
    imports = _type_only_imports()
    assert len(imports) > 10  # the scan sees them
    missing = [(where, module, name) for where, module, name in imports
               if not hasattr(importlib.import_module(module), name)]
    assert missing == []
