"""A library's logger quieted for one call, then left as the host had it.

ragraph runs inside other people's processes (the Python API, LangChain, a server): a level it
sets on a shared logger would silence the host's own use of that library for the rest of the
process."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def logger_level(name: str, level: int) -> Iterator[None]:
    """Logger `name` at `level` inside the block, at its own level again after it."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)
