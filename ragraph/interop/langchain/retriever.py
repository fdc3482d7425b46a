"""`RagraphRetriever`: the index of an open `ragraph.Runtime` as a LangChain `BaseRetriever`.

A search is a one-node workflow (retrieve `k` passages for the query at `nprobe`) run by the
runtime's shared scheduler: searches from many threads, tasks and workflows share its search
steps, and the results are exactly what `index.search` returns at that nprobe. `mode="hybrid"`
fuses them with the index's keyword search; `filter` keeps the passages of some sources or
fields. `invoke(query, k=..., mode=..., filter=...)` overrides them for one call (LangChain's
per-call `k`). Each passage becomes a `Document`: its text as `page_content`; `id`, `title`,
`score` (dense: the cosine similarity, larger is nearer; hybrid: the fused score) and, for
passages of ingested documents, `source`, `start` and `end` (the document's path and the
passage's character span in it) as metadata."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, PrivateAttr

from ragraph.api.load import load
from ragraph.api.runtime import Runtime
from ragraph.errors import ConfigError
from ragraph.ir import END, START, RAGraph
from ragraph.ir.values import Passage
from ragraph.program.compiled import CompiledWorkflow
from ragraph.runtime.retrieval.options import SearchOptions


class RagraphRetriever(BaseRetriever):
    """`RagraphRetriever(runtime=rt, k=5, nprobe=None, mode="dense", filter=None)`: `nprobe`
    None searches as many clusters as the runtime's `nprobe` option says; `filter` is
    `{"source": GLOB, FIELD: VALUE, ...}`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    runtime: Runtime
    k: int = 5
    nprobe: int | None = None
    mode: str = "dense"
    filter: dict[str, Any] | None = None
    _workflow: CompiledWorkflow = PrivateAttr()

    def __init__(self, **fields: Any) -> None:
        # Checked before pydantic's validation, which would wrap a ConfigError in its own.
        nprobe = fields.get("nprobe")
        SearchOptions.of(fields.get("k", 5), fields.get("mode", "dense"), fields.get("filter"))
        if nprobe is not None and (not isinstance(nprobe, int) or isinstance(nprobe, bool)
                                   or nprobe < 1):
            raise ConfigError("nprobe", f"must be a positive integer, got {nprobe!r}")
        if not isinstance(fields.get("runtime"), Runtime):
            raise ConfigError("runtime", "must be a ragraph.Runtime")
        super().__init__(**fields)
        passes = self.runtime.config.scheduler.passes
        self._workflow = search_workflow(self.k, self.nprobe, passes, self.mode)

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, mode: str | None = None,
                                filter: dict[str, Any] | None = None,  # noqa: A002
                                ) -> list[Document]:
        answer = self.runtime.run(self._workflow, query, k=k, mode=mode,
                                  filter=self._filter(filter))
        return [document_of(p) for p in answer.passages]

    async def _aget_relevant_documents(
            self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
            k: int | None = None, mode: str | None = None,
            filter: dict[str, Any] | None = None,  # noqa: A002
    ) -> list[Document]:
        answer = await self.runtime.arun(self._workflow, query, k=k, mode=mode,
                                         filter=self._filter(filter))
        return [document_of(p) for p in answer.passages]

    def _filter(self, given: dict[str, Any] | None) -> dict[str, Any] | None:
        """A call's filter replaces the retriever's (as LangChain vector stores' do)."""
        return given if given is not None else self.filter


def search_workflow(k: int, nprobe: int | None, passes: str,
                    mode: str = "dense") -> CompiledWorkflow:
    graph = RAGraph("retriever")
    graph.add_input("question")
    graph.add_retrieval("search", topk=k, query="question", output="docs", nprobe=nprobe,
                        mode=mode)
    graph.add_edge(START, "search")
    graph.add_edge("search", END)
    return load(graph, passes)


def document_of(passage: Passage) -> Document:
    """A passage as a LangChain Document (its store id, title, distance and origin as
    metadata, under the names `ragraph run --output` gives them)."""
    return Document(page_content=passage.text,
                    metadata={**passage.to_json(text=False), "score": passage.score})
