"""The results file: one JSON line per measured point, appended as each is measured, so a
killed tune keeps what it measured and a rerun measures only the rest.

Every line carries the run it belongs to (`context`: the workflow, the dev questions, the
engine...): a point measured on another engine or other questions is not this run's, and a
file holding such lines is refused rather than mixed in."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragraph.errors import ConfigError
from ragraph.tune.measure import Measurement


def context_of(settings: Mapping[str, Any]) -> str:
    """A short digest of what makes two runs' points comparable."""
    text = json.dumps(dict(settings), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Results:
    path: Path | None  # None: kept in memory only
    context: str
    measured: dict[str, Measurement] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path | None, context: str) -> Results:
        results = cls(path, context)
        if path is None or not path.exists():
            return results
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        for number, line in enumerate(lines, 1):
            try:
                raw = json.loads(line) if line.strip() else None
            except json.JSONDecodeError:
                if number < len(lines):
                    raise ConfigError("--results", f"{path}:{number} is not a JSON line") from None
                # A kill cut the last line short: that point is measured again.
                path.write_text("".join(lines[:-1]), encoding="utf-8")
                break
            if raw is not None:
                results._take(raw, f"{path}:{number}")
        return results

    def _take(self, raw: dict[str, Any], where: str) -> None:
        if raw.get("context") != self.context:
            raise ConfigError("--results", f"{where} was measured in another run (another "
                              "workflow, dev file, engine or index); give a new --results file")
        measurement = Measurement.from_json(raw)
        self.measured[measurement.point.key] = measurement

    def get(self, key: str) -> Measurement | None:
        return self.measured.get(key)

    def add(self, measurement: Measurement) -> None:
        self.measured[measurement.point.key] = measurement
        if self.path is None:
            return
        line = json.dumps({"context": self.context, **measurement.to_json()})
        with self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
