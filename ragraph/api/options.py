"""A Runtime's options: keyword names are `RuntimeConfig`'s fields, checked at the edge."""

from __future__ import annotations

import difflib
import os
from dataclasses import fields
from typing import Any

from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig

# Fields a user may well give as a `pathlib.Path`; the config keeps them as text.
PATH_FIELDS = ("model", "index", "profile", "chat_template")


def runtime_config(config: RuntimeConfig | None, options: dict[str, Any]) -> RuntimeConfig:
    """`config` as given, else one built from `options`; an unknown option is a ConfigError
    naming it (with the nearest field, when one is close)."""
    if config is not None:
        if options:
            raise ConfigError(next(iter(options)), "give the options either as a RuntimeConfig "
                              "or as keywords, not both")
        if not isinstance(config, RuntimeConfig):
            raise ConfigError("config", f"must be a RuntimeConfig, got {type(config).__name__}")
        return config
    known = [f.name for f in fields(RuntimeConfig)]
    for name in options:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(name, f"not a runtime option{hint}; the options are "
                              f"RuntimeConfig's fields: {', '.join(known)}")
    given = {k: os.fspath(v) if k in PATH_FIELDS and isinstance(v, os.PathLike) else v
             for k, v in options.items()}
    if isinstance(given.get("replicas"), list):
        given["replicas"] = tuple(given["replicas"])
    return RuntimeConfig(**given)
