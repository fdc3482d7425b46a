"""The program layer sits between the compiler and the runtime: the runtime runs programs and
never imports the compiler (`ragraph.passes`), as torch.fx's passes import its `Interpreter`
and never the reverse."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(source: str, package: str) -> set[str]:
    """Every module `source` (a module of `package`) imports, at the top or inside a function,
    relative imports resolved."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def importers_of(room: str, banned: str) -> list[str]:
    found = []
    for path in sorted((ROOT / room.replace(".", "/")).rglob("*.py")):
        package = ".".join(path.relative_to(ROOT).parent.parts)
        imported = imported_modules(path.read_text(encoding="utf-8"), package)
        bad = {m for m in imported if m == banned or m.startswith(banned + ".")}
        found += [f"{path.relative_to(ROOT)} imports {m}" for m in sorted(bad)]
    return found


def test_the_runtime_never_imports_the_compiler():
    assert importers_of("ragraph.runtime", "ragraph.passes") == []


def test_the_program_layer_imports_neither_the_compiler_nor_the_runtime():
    assert importers_of("ragraph.program", "ragraph.passes") == []
    assert importers_of("ragraph.program", "ragraph.runtime") == []


def test_the_scan_sees_lazy_and_relative_imports():
    """A lazy import inside a function (the kind `Catalog.compile` had) and a relative one are
    both seen."""
    lazy = "def f():\n    from ragraph.passes import compile\n"
    assert "ragraph.passes" in imported_modules(lazy, "ragraph.runtime")
    relative = "from ...passes import lower\n"
    assert "ragraph.passes.lower" in imported_modules(relative, "ragraph.runtime.scheduler")


def test_importing_the_scheduler_loads_no_pass():
    check = ("import sys\n"
             "import ragraph.runtime.scheduler.wavefront, ragraph.runtime.app\n"
             "print(sorted(m for m in sys.modules if m.startswith('ragraph.passes')))\n")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"
