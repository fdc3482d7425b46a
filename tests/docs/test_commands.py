"""Every `ragraph ...` command the README and the documentation pages show parses with the real
command-line parser (a renamed or removed flag fails here), and the README's links resolve."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ragraph.cli.main import build_parser
from tests.docs.pages import DOCS, FENCE

ROOT = DOCS.parent
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
SHELL_END = {"|", ">", ">>", "&&", ";"}
COMMAND = re.compile(r"(?:\.venv/bin/)?ragraph\s")


def shown_commands(page: Path) -> list[tuple[Path, list[str]]]:
    text = page.read_text(encoding="utf-8")
    commands = []
    for block in FENCE.finditer(text):
        if block["info"].strip() not in ("bash", "sh", "console"):
            continue
        for line in block["body"].replace("\\\n", " ").splitlines():
            line = line.removeprefix("$ ").strip()
            if not COMMAND.match(line):
                continue  # another program, or a command's output
            words = shlex.split(line, comments=True)
            cut = next((i for i, w in enumerate(words) if w in SHELL_END), len(words))
            commands.append((page, words[1:cut]))
    return commands


COMMANDS = [c for page in PAGES for c in shown_commands(page)]


def test_the_readme_shows_the_main_commands() -> None:
    readme = [argv for page, argv in COMMANDS if page.name == "README.md"]
    assert ["run", "workflows/hyde.rag", "--question", "Who designed the Eiffel Tower?"] in readme
    assert len(COMMANDS) >= 40


@pytest.mark.parametrize("page,argv", COMMANDS,
                         ids=[f"{p.relative_to(ROOT)}:{' '.join(a[:2])}" for p, a in COMMANDS])
def test_command_parses(page: Path, argv: list[str], capsys) -> None:
    try:
        build_parser().parse_args(argv)
    except SystemExit as exit:
        pytest.fail(f"{page.relative_to(ROOT)}: `ragraph {shlex.join(argv)}` does not parse "
                    f"(status {exit.code}): {capsys.readouterr().err}")


def test_readme_links_resolve() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)", text)
    assert links
    broken = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert broken == []
