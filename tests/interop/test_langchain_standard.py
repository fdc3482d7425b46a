"""LangChain's own standard tests for retrievers (langchain-tests, from PyPI) on
`RagraphRetriever`: the constructor's `k`, the per-call `invoke(query, k=...)`, Documents from
invoke and ainvoke. The runtime is the simulated engine over real faiss."""

from __future__ import annotations

from typing import Any

import pytest

import ragraph
from ragraph.interop.langchain import RagraphRetriever
from tests.runtime.fakes import random_search

pytest.importorskip("langchain_tests")
from langchain_tests.integration_tests import RetrieversIntegrationTests  # noqa: E402

# The standard suite leaves its one async test unmarked (its users run pytest-asyncio in auto
# mode) and forbids overriding its tests; this suite's mode is strict, so the module is marked.
# (pytest-asyncio then warns that the sync tests carry the mark: harmless, silenced.)
pytestmark = [pytest.mark.asyncio,
              pytest.mark.filterwarnings("ignore:The test <Function .* is marked with "
                                         "'@pytest.mark.asyncio':pytest.PytestWarning")]
_RUNTIME: list[ragraph.Runtime] = []


@pytest.fixture(scope="module", autouse=True)
def runtime():
    with ragraph.Runtime(search=random_search(), engine="sim", search_threads=1,
                         nprobe=16) as rt:
        _RUNTIME.append(rt)
        yield rt
        _RUNTIME.clear()


class TestRagraphRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[RagraphRetriever]:
        return RagraphRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"runtime": _RUNTIME[0], "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return "What is notable about topic number 3?"
