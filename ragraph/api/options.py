"""A Runtime's options: a `RuntimeConfig`, a TOML config file, and keyword knobs (the flags of
`ragraph run` with underscores) over the file, checked at the edge."""

from __future__ import annotations

import difflib
import os
from typing import Any

from ragraph.errors import ConfigError
from ragraph.runtime.checks import check_type
from ragraph.runtime.config import RuntimeConfig, knob_type, knobs
from ragraph.runtime.config_file import read_config

# Knobs a user may well give as a `pathlib.Path`; the config keeps them as text.
PATH_FIELDS = ("model", "index", "profile", "chat_template")


def runtime_config(config: RuntimeConfig | str | os.PathLike[str] | None,
                   options: dict[str, Any]) -> RuntimeConfig:
    """`config` as given; else the file at `config` (a path) or the defaults, with `options`
    over it. An unknown option is a ConfigError naming it (with the nearest knob, when one is
    close)."""
    if isinstance(config, RuntimeConfig):
        if options:
            raise ConfigError(next(iter(options)), "give the options either as a RuntimeConfig "
                              "or as keywords, not both")
        return config
    if config is not None and not isinstance(config, str | os.PathLike):
        raise ConfigError("config", "must be a RuntimeConfig or a TOML file's path, got "
                          f"{type(config).__name__}")
    known = knobs()
    for name in options:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(name, f"not a runtime option{hint}; the options are: "
                              f"{', '.join(known)}")
    given = {k: os.fspath(v) if k in PATH_FIELDS and isinstance(v, os.PathLike) else v
             for k, v in options.items()}
    for name, value in given.items():
        check_type(name, value, knob_type(name))
    return RuntimeConfig.of(read_config(config) if config is not None else None, **given)
