"""The OTLP endpoint is part of the run configuration, checked where it is built."""

from __future__ import annotations

import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.config import RuntimeConfig


def test_otlp_is_off_unless_given() -> None:
    assert RuntimeConfig.of(engine="sim").otlp is None
    assert RuntimeConfig.of(engine="sim", otlp="http://127.0.0.1:4318").otlp == "http://127.0.0.1:4318"


def test_otlp_must_be_a_url() -> None:
    with pytest.raises(ConfigError, match="otlp") as e:
        RuntimeConfig.of(engine="sim", otlp="127.0.0.1:4318")
    assert e.value.field == "otlp"
