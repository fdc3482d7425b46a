"""A measured GPU profile: prefill and decode-step times of one model shape on one GPU.

The file is JSON (format `ragraph-gpu-profile/1`), written by `ragraph calibrate` or by hand:

    {"format": "ragraph-gpu-profile/1", "model": "Llama-3.1-8B", "gpu": "NVIDIA H100 80GB HBM3",
     "dtype": "bfloat16", "method": "how it was measured", "note": "what is missing",
     "shape": {"layers": 32, "hidden": 4096, ...},  # the roofline outside the points
     "prefill": [{"tokens": 128, "ms": 11.7}, ...],                 # one sequence, empty cache
     "decode": [{"batch": 1, "context": 512, "ms": 6.7}, ...]}      # context: tokens a sequence

Every point may say `"measured": false` (an estimate); `ragraph calibrate` writes measured points
only. The loader checks everything and names the file and the field of the first problem.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from ragraph.errors import ConfigError
from ragraph.runtime.llm.sim.shape import ModelShape, shape_from_json

FORMAT = "ragraph-gpu-profile/1"
DEFAULT_PROFILE = "h100-llama-3.1-8b.json"
KEYS = ("format", "model", "gpu", "dtype", "method", "note", "shape", "prefill", "decode")


@dataclass(frozen=True)
class PrefillPoint:
    tokens: int  # prompt tokens of one sequence, prefilled into an empty KV cache
    ms: float
    measured: bool = True


@dataclass(frozen=True)
class DecodePoint:
    batch: int  # sequences advancing one token together
    context: int  # tokens already in each sequence's KV cache
    ms: float
    measured: bool = True


@dataclass(frozen=True)
class GpuProfile:
    name: str  # the file's stem
    model: str
    gpu: str
    dtype: str
    method: str
    note: str
    shape: ModelShape  # named after `model`
    prefill: tuple[PrefillPoint, ...]  # sorted by tokens (here, however given)
    decode: tuple[DecodePoint, ...]  # sorted by (batch, context)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefill", tuple(sorted(self.prefill, key=lambda p: p.tokens)))
        object.__setattr__(self, "decode",
                           tuple(sorted(self.decode, key=lambda p: (p.batch, p.context))))

    @property
    def measured_points(self) -> int:
        return sum(p.measured for p in self.prefill) + sum(p.measured for p in self.decode)

    def to_json(self) -> dict:
        return {
            "format": FORMAT, "model": self.model, "gpu": self.gpu, "dtype": self.dtype,
            "method": self.method, "note": self.note,
            "shape": {k: v for k, v in self.shape.to_json().items() if k != "name"},
            "prefill": [_point_json(p, ("tokens", "ms")) for p in self.prefill],
            "decode": [_point_json(p, ("batch", "context", "ms")) for p in self.decode],
        }


def load_profile(path: Path | str) -> GpuProfile:
    """A profile file, or the name of one shipped with ragraph (`shipped_profiles()`), checked;
    a `ConfigError` names the file and the field."""
    if not Path(path).exists() and str(path) in shipped_profiles():
        return _shipped(str(path))
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError("--profile", f"cannot read {path}: {err.strerror or err}") from err
    except json.JSONDecodeError as err:
        raise ConfigError(str(path), f"not JSON: {err.msg} at line {err.lineno}") from err
    return parse_profile(data, str(path), Path(path).stem)


def default_profile() -> GpuProfile:
    """The H100 / Llama-3.1-8B profile shipped with ragraph."""
    return _shipped(DEFAULT_PROFILE.removesuffix(".json"))


def shipped_profiles() -> tuple[str, ...]:
    """The names of the profiles shipped with ragraph (measured by `ragraph calibrate` on the
    GPU each names; docs/benchmarks/gpu.md)."""
    folder = resources.files("ragraph.runtime.llm.sim") / "profiles"
    return tuple(sorted(f.name.removesuffix(".json") for f in folder.iterdir()
                        if f.name.endswith(".json")))


@cache
def _shipped(name: str) -> GpuProfile:
    source = resources.files("ragraph.runtime.llm.sim") / "profiles" / f"{name}.json"
    with resources.as_file(source) as path:
        return load_profile(path)


def write_profile(profile: GpuProfile, path: Path) -> None:
    """The profile as JSON with one point a line, so a reader can scan the table."""
    data = profile.to_json()
    lines = []
    for key, value in data.items():
        if isinstance(value, list):
            rows = ",\n".join(f"  {json.dumps(row)}" for row in value)
            lines.append(f' "{key}": [\n{rows}\n ]')
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def parse_profile(data: object, origin: str, name: str) -> GpuProfile:
    if not isinstance(data, dict):
        raise ConfigError(origin, "must be a JSON object")
    if data.get("format") != FORMAT:
        raise ConfigError(origin, f"format: must be {FORMAT!r}, got {data.get('format')!r}")
    unknown = set(data) - set(KEYS)
    if unknown:
        raise ConfigError(origin, f"unknown keys {', '.join(sorted(unknown))} (known: "
                          f"{', '.join(KEYS)})")
    text = {key: _text(data, key, origin, required=key in ("model", "gpu", "dtype"))
            for key in ("model", "gpu", "dtype", "method", "note")}
    shape = shape_from_json(data.get("shape"), origin, text["model"])
    prefill = _points(data, "prefill", origin, _prefill_point)
    decode = _points(data, "decode", origin, _decode_point)
    _unique(origin, "prefill", [p.tokens for p in prefill])
    _unique(origin, "decode", [(p.batch, p.context) for p in decode])
    return GpuProfile(name, shape=shape, prefill=tuple(prefill), decode=tuple(decode), **text)


def _text(data: dict, key: str, origin: str, required: bool) -> str:
    value = data.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        what = "a non-empty string" if required else "a string"
        raise ConfigError(origin, f"{key}: must be {what}, got {value!r}")
    return value


def _points(data: dict, key: str, origin: str, make) -> list:
    rows = data.get(key)
    if not isinstance(rows, list) or not rows:
        raise ConfigError(origin, f"{key}: must be a non-empty list of points")
    return [make(row, f"{key}[{i}]", origin) for i, row in enumerate(rows)]


def _prefill_point(row: object, where: str, origin: str) -> PrefillPoint:
    row = _row(row, where, origin, ("tokens", "ms"))
    return PrefillPoint(_count(row, "tokens", where, origin, 1), _ms(row, where, origin),
                        _flag(row, where, origin))


def _decode_point(row: object, where: str, origin: str) -> DecodePoint:
    row = _row(row, where, origin, ("batch", "context", "ms"))
    return DecodePoint(_count(row, "batch", where, origin, 1),
                       _count(row, "context", where, origin, 0), _ms(row, where, origin),
                       _flag(row, where, origin))


def _row(row: object, where: str, origin: str, keys: tuple[str, ...]) -> dict:
    if not isinstance(row, dict):
        raise ConfigError(origin, f"{where}: must be an object with {', '.join(keys)}")
    missing = [k for k in keys if k not in row]
    unknown = set(row) - set(keys) - {"measured"}
    if missing or unknown:
        what = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(sorted(unknown))}"
        raise ConfigError(origin, f"{where}: {what}")
    return row


def _count(row: dict, key: str, where: str, origin: str, least: int) -> int:
    value = row[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ConfigError(origin, f"{where}.{key}: must be an integer >= {least}, got {value!r}")
    return value


def _ms(row: dict, where: str, origin: str) -> float:
    value = row["ms"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise ConfigError(origin, f"{where}.ms: must be a positive number, got {value!r}")
    return float(value)


def _flag(row: dict, where: str, origin: str) -> bool:
    value = row.get("measured", True)
    if not isinstance(value, bool):
        raise ConfigError(origin, f"{where}.measured: must be true or false, got {value!r}")
    return value


def _unique(origin: str, key: str, keys: list) -> None:
    seen = set()
    for k in keys:
        if k in seen:
            raise ConfigError(origin, f"{key}: two points at {k}")
        seen.add(k)


def _point_json(point, keys: tuple[str, ...]) -> dict:
    row = {k: getattr(point, k) for k in keys}
    return row if point.measured else {**row, "measured": False}
