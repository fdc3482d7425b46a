"""The rich Console every command prints through: readable on a terminal and off one.

Off a terminal (a log, CI, a pipe, a file) rich lays everything out in 80 columns unless
`COLUMNS` says otherwise, and a table wider than that has its column names and values cut
("np…", "10…"). There the console is `OFF_TERMINAL_WIDTH` wide instead: rich tables take only
the width they need, so a table keeps its natural width and lines are not padded. On a terminal,
or with `COLUMNS` set, rich's own width holds.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console

# Wide enough for the widest table ragraph prints (the tune front, the bench cells).
OFF_TERMINAL_WIDTH = 240


def new_console(**options: Any) -> Console:
    """`rich.console.Console(**options)`, `OFF_TERMINAL_WIDTH` wide off a terminal unless a
    width or `COLUMNS` is given."""
    out = Console(**options)
    if "width" not in options and not out.is_terminal and not os.environ.get("COLUMNS"):
        out.width = OFF_TERMINAL_WIDTH
    return out
