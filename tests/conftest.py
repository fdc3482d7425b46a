"""Suite-wide: a test that needs a real model (the Gemma GGUF, a llama.cpp server, the MiniLM
embedder) or the embedded default index is `slow`, so `make test` (-m "not slow") stays fast and
`make test-all` runs everything. Tests get the mark from the fixtures they use; tests that reach
a real model another way carry it themselves."""

from __future__ import annotations

import pytest

REAL_MODEL_FIXTURES = frozenset({"model_path", "llama_server", "reference", "embedder",
                                 "query_embedder", "musique_index"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
