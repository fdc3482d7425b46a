"""The checks the configuration's parts share; each error names the field it is about."""

from __future__ import annotations

from ragraph.errors import ConfigError


def positive_int(name: str, value: object) -> None:
    """`value` is an int >= 1 (a bool is not: True would pass as 1)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(name, f"must be a positive integer, got {value!r}")


def http_url(name: str, value: str | None, what: str = "an http(s):// URL") -> None:
    """`value`, when given, starts with http:// or https://."""
    if value is not None and not value.startswith(("http://", "https://")):
        raise ConfigError(name, f"must be {what}, got {value!r}")
