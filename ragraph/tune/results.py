"""The results file: one JSON line per measured point, appended as each is measured, so a
killed tune keeps what it measured and a rerun measures only the rest.

Every line carries the run it belongs to (`context`: the workflow, the dev questions, the
engine...): a point measured on another engine or other questions is not this run's, and a
file holding such lines is refused rather than mixed in. Lines written before the release and
the simulated engine's budget were searched read as run at the run's own (`Unsearched`: release
"step" and 8,192 tokens as shipped), so such a file is resumed, not measured again."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragraph.errors import ConfigError
from ragraph.tune.measure import Measurement
from ragraph.tune.space import AS_SHIPPED, Unsearched


def context_of(settings: Mapping[str, Any]) -> str:
    """A short digest of what makes two runs' points comparable."""
    text = json.dumps(dict(settings), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Results:
    path: Path | None  # None: kept in memory only
    context: str
    # The tuned workflow's name, on every line: `serve --adapt` refuses a front of another one.
    workflow: str | None = None
    measured: dict[str, Measurement] = field(default_factory=dict)
    before: Unsearched = AS_SHIPPED  # the run's release and budget, for older lines
    older: int = 0  # lines read at `before`: the file cannot say what they ran at

    @classmethod
    def open(cls, path: Path | None, context: str, workflow: str | None = None,
             before: Unsearched = AS_SHIPPED) -> Results:
        results = cls(path, context, workflow, before=before)
        if path is None or not path.exists():
            return results
        lines = read_lines(path, "--results")
        for number, line in enumerate(lines, 1):
            try:
                raw = json.loads(line) if line.strip() else None
            except (json.JSONDecodeError, RecursionError):
                if number < len(lines):
                    raise ConfigError("--results", f"{path}:{number}: not a JSON line") from None
                # A kill cut the last line short: that point is measured again.
                path.write_text("".join(lines[:-1]), encoding="utf-8")
                break
            if raw is not None:
                results._take(raw, f"{path}:{number}")
        return results

    def _take(self, raw: dict[str, Any], where: str) -> None:
        measurement = measurement_of(raw, where, "--results", self.before)
        point = raw.get("point")
        if isinstance(point, dict) and "release" not in point:
            self.older += 1
        if raw.get("context") != self.context:
            raise ConfigError("--results", f"{where} was measured in another run (another "
                              "workflow, dev file, engine or index); give a new --results file")
        self.measured[measurement.point.key] = measurement

    def get(self, key: str) -> Measurement | None:
        return self.measured.get(key)

    def add(self, measurement: Measurement) -> None:
        self.measured[measurement.point.key] = measurement
        if self.path is None:
            return
        tag = {"workflow": self.workflow} if self.workflow is not None else {}
        line = json.dumps({"context": self.context, **tag, **measurement.to_json()})
        with self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


def measurement_of(raw: object, where: str, flag: str,
                   before: Unsearched = AS_SHIPPED) -> Measurement:
    """One line of a results or front file (`where`: FILE:LINE): a line that is not a measured
    point, or whose fields are missing or of the wrong type, is an error naming it. `before`:
    the run's release and budget, for a line written before they were searched."""
    if not isinstance(raw, dict):
        raise ConfigError(flag, f"{where}: not a measured point (a JSON object), got "
                          f"{type(raw).__name__}")
    try:
        return Measurement.from_json(raw, before)
    except KeyError as err:
        raise ConfigError(flag, f"{where}: a measured point without {err}") from None
    except (TypeError, ValueError, AttributeError) as err:
        raise ConfigError(flag, f"{where}: a field of the wrong type ({err})") from None


def read_lines(path: Path, flag: str) -> list[str]:
    """A results or front file's lines (kept ends); not UTF-8 or unreadable, an error naming the
    file (and the line)."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(flag, f"cannot read {path}: {err.strerror or err}") from None
    try:
        return raw.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ConfigError(flag, f"{path}:{line}: not UTF-8 text") from None
