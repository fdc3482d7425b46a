"""The real parts a test needs and this machine may lack: a model package, llama.cpp, the default
index, llama-server, `../shared/data`.

On a developer's machine a missing one skips the test, with the reason (`make test-all` prints
the reasons: `-rs`). Under `CI=true` it fails the test instead: a CI run that skipped its
real-model tests would look green while testing nothing real. Optional extras and tools
(langgraph, opentelemetry, chromium, Graphviz) still skip: they are not this rule's."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def missing(what: str) -> NoReturn:
    """A real part this test needs is not here: skip, or under CI=true fail, saying which."""
    if in_ci():
        pytest.fail(f"{what} (CI=true: a missing model, index or data set fails the run)",
                    pytrace=False)
    pytest.skip(what)


def need_module(name: str, reason: str | None = None) -> ModuleType:
    """`pytest.importorskip` for a real part: the module, or `missing` with the import error."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        missing(reason or f"could not import {name!r}: {err}")
