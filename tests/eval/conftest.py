"""Shared fixtures: the real QA data lives beside the repository, never inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real import missing

DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        missing(f"shared data not found at {DATA_DIR}")
    return DATA_DIR
