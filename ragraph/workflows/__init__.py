"""The shipped workflows, installed with the package: `ragraph run hyde` and
`ragraph.load("hyde")` find them by name wherever ragraph is installed. The repository's
`workflows/` folder is a link to this one, so `workflows/hyde.rag` works in a checkout."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """The shipped workflows' names (`hyde`, `irg`, ...)."""
    return sorted(p.stem for p in HERE.glob("*.rag"))


def shipped(name: str) -> Path | None:
    """The shipped workflow called `name` (`hyde` or `hyde.rag`); None when `name` is a path
    (it has a folder in it) or no shipped workflow has that name."""
    stem = name.removesuffix(".rag")
    if not stem or Path(name).name != name or stem.startswith("."):
        return None
    path = HERE / f"{stem}.rag"
    return path if path.is_file() else None
