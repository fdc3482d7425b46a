"""A run's configuration as a TOML file: the tree of `RuntimeConfig`, one table per part.

    otlp = "http://localhost:4318"   # the top-level knobs
    [llm]
    engine = "sim"
    [scheduler]
    concurrency = 16

Keys are the knobs' names (the flags' without `--`, `-` as `_`); a key that is not one, or one
in the wrong table, is an error naming the key and the file. Paths are read as the flags' are,
from the current directory. `ragraph run/serve/bench --config FILE` and
`ragraph.Runtime(config=FILE)` read it; flags and keywords given beside it override it."""

from __future__ import annotations

import difflib
import os
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from ragraph.errors import ConfigError
from ragraph.runtime.checks import check_type
from ragraph.runtime.config import PARTS, TOP_LEVEL, knob_type, knobs, part_of


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The file's tree, every table and key known (not yet validated: `RuntimeConfig.of`)."""
    path = Path(path)
    try:
        tree = tomllib.loads(_text(path))
    except OSError as err:
        raise ConfigError("config", f"cannot read {path}: {err.strerror or err}") from err
    except tomllib.TOMLDecodeError as err:
        raise ConfigError("config", f"{path} is not valid TOML: {err}") from err
    for key, value in tree.items():
        if key in PARTS:
            _check_table(key, value, path)
            for name, item in value.items():
                check_type(f"{key}.{name}", item, knob_type(name), f"in {path} ")
        elif key in knobs() and key not in TOP_LEVEL:
            raise _misplaced(key, key, "the top level", path)
        elif key not in TOP_LEVEL:
            raise _unknown(key, [*PARTS, *TOP_LEVEL], path, "top-level key or table")
        else:
            check_type(key, value, knob_type(key), f"in {path} ")
    return tree


def _text(path: Path) -> str:
    """The file as text; bytes that are not UTF-8 are an error naming the line (TOML is UTF-8)."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ConfigError("config", f"{path}:{line}: not UTF-8 text (byte "
                          f"0x{raw[err.start]:02x}); TOML files are UTF-8") from None


def _check_table(part: str, table: Any, path: Path) -> None:
    if not isinstance(table, dict):
        raise ConfigError(part, f"in {path} must be a table ([{part}]), got {table!r}")
    known = [f.name for f in fields(PARTS[part])]
    for key in table:
        if key in known:
            continue
        if key in knobs():
            raise _misplaced(f"{part}.{key}", key, f"[{part}]", path)
        raise _unknown(f"{part}.{key}", known, path, f"key of [{part}]", key)


def _misplaced(name: str, key: str, where: str, path: Path) -> ConfigError:
    home = part_of(key)
    right = f"[{home}]" if home else "the top level, above the tables"
    return ConfigError(name, f"in {path} belongs in {right}, not {where}")


def _unknown(name: str, known: list[str], path: Path, what: str,
             key: str | None = None) -> ConfigError:
    near = difflib.get_close_matches(key or name, known, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return ConfigError(name, f"unknown {what} in {path}{hint}; known: {', '.join(known)}")
