"""Requests for `ragraph run --input`: FlashRAG JSONL line by line (a bad line becomes that line's
error and the rest go on), or any dataset format `ragraph.eval` knows (NQ, HotpotQA, MuSiQue)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ragraph.errors import ConfigError, RagraphError
from ragraph.runtime.request import Request


@dataclass(frozen=True)
class BadLine:
    """An input line that is not a valid request: reported in the output, never run."""

    id: str
    error: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "error": self.error}


def read_requests(path: Path, limit: int | None = None) -> list[Request | BadLine]:
    if not path.is_file():
        raise ConfigError("--input", f"{path}: no such file")
    if path.suffix == ".jsonl" and not path.name.endswith(".gz"):
        return _jsonl(path, limit)
    from ragraph.eval.datasets import load_dataset

    return [
        Request(id=ex.id, question=ex.question, golden_answers=tuple(ex.golden_answers))
        for ex in load_dataset(path, limit=limit)
    ]


def _jsonl(path: Path, limit: int | None) -> list[Request | BadLine]:
    out: list[Request | BadLine] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if limit is not None and len(out) >= limit:
                break
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as err:
                out.append(BadLine(f"line-{number}", f"{where}: not JSON: {err.msg}"))
                continue
            try:
                out.append(Request.from_json(raw, where))
            except RagraphError as err:
                rid = raw.get("id") if isinstance(raw, dict) else None
                out.append(BadLine(str(rid) if rid is not None else f"line-{number}", str(err)))
    return out
