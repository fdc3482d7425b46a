"""Suite-wide: a test that needs a real model (the Gemma GGUF, a llama.cpp server, the MiniLM
embedder) or the embedded default index is `slow`, so `make test` (-m "not slow") stays fast and
`make test-all` runs everything. Tests get the mark from the fixtures they use; tests that reach
a real model another way carry it themselves.

Tests whose path depends on the machine take the `host` fixture (tests/hosts.py); tests that
need a real model, the index or ../shared/data skip through tests/real.py, which fails them
instead under CI=true."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.hosts import HOSTS, Host, leave, present

REAL_MODEL_FIXTURES = frozenset({"model_path", "llama_server", "reference", "embedder", "serial_llamacpp",
                                 "query_embedder", "musique_index"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(params=HOSTS, ids=lambda host: host.name)
def host(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """The test runs once on each machine of `tests/hosts.HOSTS` (cores, last-level cache, the
    faster product library, exact int8 products), presented to ragraph's own readings of them:
    a host-sensitive test asserts the rule for the host it is given."""
    present(request.param, monkeypatch, tmp_path_factory.mktemp("sysfs"))
    yield request.param
    leave(monkeypatch)
