"""Where the workflow files and golden listings live."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / "workflows").glob("*.rag"))
GOLDEN = Path(__file__).parent / "golden"
