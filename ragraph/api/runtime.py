"""`ragraph.Runtime`: the engines and one shared scheduler, opened once, answering questions
from any thread or task.

Every call joins the same scheduler run (the one `ragraph serve` keeps for its HTTP clients):
requests from many threads or tasks batch together as the lines of `ragraph run --input` do.
The scheduler lives on a private event loop in a thread of its own; the sync methods wait on
it, the async ones await it from the caller's loop."""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ragraph.api.answer import Answer
from ragraph.api.events import Event, Finished
from ragraph.api.load import Workflow, load
from ragraph.api.loop import LoopThread
from ragraph.api.options import runtime_config
from ragraph.api.session import OnAnswer, Session, Sink
from ragraph.errors import ConfigError, RagraphError, RuntimeClosed
from ragraph.ir.values import Value
from ragraph.program.compiled import CompiledWorkflow
from ragraph.runtime.app import RunResult
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.llm.protocol import EngineCounters
from ragraph.runtime.request import Request, check_text, initial_variables
from ragraph.runtime.retrieval.options import SearchOptions
from ragraph.runtime.search_service import SearchService
from ragraph.runtime.trace import Tracer

if TYPE_CHECKING:
    from ragraph.runtime.retrieval.build.ingest import IndexReport

T = TypeVar("T")
Question = str | Mapping[str, Any] | Request


class Runtime:
    """`Runtime(engine="sim", index="my-index", concurrency=16)`: keyword names are the flags of
    `ragraph run`; or give one `RuntimeConfig`; or `config="ragraph.toml"`, a config file, with
    keywords over it (docs/guides/config.md). Open it with
    `with` (or `async with`, or `open()`/`close()`); closing lets the requests in flight
    finish, then closes the engines. `search` (an opened `SearchService`) and `tracer` are for
    embedding: the index of `index` is opened otherwise, and a tracer is made."""

    def __init__(self, config: RuntimeConfig | str | os.PathLike[str] | None = None, /, *,
                 search: SearchService | None = None, tracer: Tracer | None = None,
                 **options: Any) -> None:
        # `config=` as a keyword too: the file reads as a named option beside the others.
        self.config = runtime_config(options.pop("config", config), options)
        self.tracer = tracer or Tracer()
        self._session = Session(self.config, search, self.tracer)
        self._loop: LoopThread | None = None
        self._compiled: dict[int, tuple[object, CompiledWorkflow]] = {}
        self._lock = threading.Lock()

    # -- opening and closing ---------------------------------------------------------------------

    def open(self) -> Runtime:
        self._begin()
        try:
            self._on_loop(self._session.start()).result()
        except BaseException:
            self._end()
            raise
        return self

    def close(self) -> None:
        """Wait for the requests in flight, then close the engines (idempotent)."""
        if self._loop is None:
            return
        try:
            self._on_loop(self._session.stop()).result()
        finally:
            self._end()

    async def aopen(self) -> Runtime:
        self._begin()
        try:
            await asyncio.wrap_future(self._on_loop(self._session.start()))
        except BaseException:
            self._end()
            raise
        return self

    async def aclose(self) -> None:
        if self._loop is None:
            return
        try:
            await asyncio.wrap_future(self._on_loop(self._session.stop()))
        finally:
            self._end()

    def __enter__(self) -> Runtime:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Runtime:
        return await self.aopen()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- answering -------------------------------------------------------------------------------

    def run(self, workflow: Workflow, question: Question, *,
            inputs: Mapping[str, Value] | None = None, id: str | None = None,  # noqa: A002
            k: int | None = None, mode: str | None = None,
            filter: Mapping[str, Any] | None = None) -> Answer:  # noqa: A002
        """The answer to one question; raises `RequestFailed` (its kind and answer) when the
        request fails, and a `ConfigError` naming the field for a bad question or input.
        `k`, `mode` ("dense" or "hybrid") and `filter` (`{"source": "guides/*.md", "title":
        ...}`) override the workflow's retrieve nodes for this request."""
        compiled, requests = self._one(workflow, question, inputs, id,
                                       SearchOptions.of(k, mode, filter))
        return self._wait(self._session.answers(compiled, requests))[0].raise_for_error()

    def batch(self, workflow: Workflow, questions: Iterable[Question], *,
              on_answer: OnAnswer | None = None, k: int | None = None, mode: str | None = None,
              filter: Mapping[str, Any] | None = None) -> list[Answer]:  # noqa: A002
        """Answers in the order of `questions` (a failed one has its `error`; the others are
        not affected). `on_answer` is called as each finishes, on the runtime's thread: it
        must not block, nor call the runtime. `k`, `mode`, `filter`: as `run`'s, for every
        question (a question given as a mapping may carry its own)."""
        compiled, requests = self._many(workflow, questions, SearchOptions.of(k, mode, filter))
        return self._wait(self._session.answers(compiled, requests, on_answer))

    def stream(self, workflow: Workflow, question: Question, *,
               inputs: Mapping[str, Value] | None = None, id: str | None = None,  # noqa: A002
               k: int | None = None, mode: str | None = None,
               filter: Mapping[str, Any] | None = None) -> Iterator[Event]:  # noqa: A002
        """Events as the request runs (`Token`, `NodeCompleted`, `Speculation`), then
        `Finished` with its answer (failed or not: a stream does not raise for it). Leaving
        the loop early cancels the request."""
        compiled, requests = self._one(workflow, question, inputs, id,
                                       SearchOptions.of(k, mode, filter))
        items: queue.SimpleQueue[Event | BaseException] = queue.SimpleQueue()
        future = self._on_loop(self._session.follow(compiled, requests[0], items.put))
        return _events(items.get, future)

    async def arun(self, workflow: Workflow, question: Question, *,
                   inputs: Mapping[str, Value] | None = None, id: str | None = None,  # noqa: A002
                   k: int | None = None, mode: str | None = None,
                   filter: Mapping[str, Any] | None = None) -> Answer:  # noqa: A002
        compiled, requests = self._one(workflow, question, inputs, id,
                                       SearchOptions.of(k, mode, filter))
        answers = await self._await(self._session.answers(compiled, requests))
        return answers[0].raise_for_error()

    async def abatch(self, workflow: Workflow, questions: Iterable[Question], *,
                     on_answer: OnAnswer | None = None, k: int | None = None,
                     mode: str | None = None,
                     filter: Mapping[str, Any] | None = None) -> list[Answer]:  # noqa: A002
        compiled, requests = self._many(workflow, questions, SearchOptions.of(k, mode, filter))
        return await self._await(self._session.answers(compiled, requests, on_answer))

    async def astream(self, workflow: Workflow, question: Question, *,
                      inputs: Mapping[str, Value] | None = None,
                      id: str | None = None,  # noqa: A002
                      k: int | None = None, mode: str | None = None,
                      filter: Mapping[str, Any] | None = None  # noqa: A002
                      ) -> AsyncIterator[Event]:
        compiled, requests = self._one(workflow, question, inputs, id,
                                       SearchOptions.of(k, mode, filter))
        caller = asyncio.get_running_loop()
        items: asyncio.Queue[Event | BaseException] = asyncio.Queue()
        sink: Sink = lambda item: caller.call_soon_threadsafe(items.put_nowait, item)  # noqa: E731
        future = self._on_loop(self._session.follow(compiled, requests[0], sink))
        try:
            event = None
            while not isinstance(event, Finished):
                event = _event(await items.get())
                yield event
        finally:
            future.cancel()  # the consumer stopped early: the request is cancelled

    # -- documents -------------------------------------------------------------------------------

    def index(self, paths: Iterable[str | os.PathLike], out: str | os.PathLike | None = None,
              *, skip_bad: bool = False, follow_links: bool = False,
              preprocess: Callable[[Path, str], str] | None = None) -> IndexReport:
        """Index the text, Markdown, HTML and PDF files under `paths` (`ragraph index build
        --docs` / `index add`): into a new index at `out` (MiniLM), or, without `out`, added
        to this runtime's `index` in place. An open runtime keeps searching the version it
        opened; a runtime opened after sees the new one. `follow_links`: read symbolic links
        that lead outside the folders; `preprocess`: `(path, text) -> text` run on each
        document's text before it is cut."""
        from ragraph.runtime.retrieval.build.ingest import add_documents, build_index

        files = [Path(p) for p in paths]
        reading = {"skip_bad": skip_bad, "follow_links": follow_links, "preprocess": preprocess}
        if out is not None:
            return build_index(files, Path(out), **reading)
        if self.config.search.index is None:
            raise ConfigError("out", "the embedded default index is not changed in place: give "
                              "out= for a new index (then Runtime(index=out))")
        return add_documents(Path(self.config.search.index), files,
                             embedder_url=self.config.search.embedder_url, **reading)

    # -- what a caller reads after a run ------------------------------------------------------

    @property
    def counters(self) -> EngineCounters:
        """What the LLM engine has computed since the runtime opened: requests, tokens, and
        forward passes (`decode_steps`: fewer than the tokens decoded when requests batch)."""
        services = self._session.services
        if services is None:
            raise RuntimeClosed("the runtime was never opened")
        return services.llm.counters()

    @property
    def chat_template(self) -> str:
        """Which template renders chat turns (known once the engine has started)."""
        services = self._session.services
        return getattr(services.llm, "chat_template", "") if services is not None else ""

    def report(self, answers: list[Answer], wall_s: float) -> RunResult:
        """`answers` as `ragraph run --input` reports a run (its summary table): after
        closing, with the scheduler's counters (speculation, clusters searched)."""
        return self._session.result(answers, wall_s)

    # -- internals -------------------------------------------------------------------------------

    def _begin(self) -> None:
        if self._loop is not None:
            raise RagraphError("the runtime is open already")
        self._loop = LoopThread()

    def _end(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.stop()

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        loop = self._loop
        if loop is None:
            coro.close()
            raise RuntimeClosed("the runtime is not open: use `with Runtime(...) as rt`")
        if loop.here:
            coro.close()
            raise RagraphError("a Runtime cannot be called from its own thread (an on_answer "
                               "callback): it would wait on itself")
        return loop.submit(coro)

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        future = self._on_loop(coro)
        try:
            return future.result()
        except BaseException:  # interrupted while waiting: the requests are cancelled
            future.cancel()
            raise

    async def _await(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(self._on_loop(coro))

    def _compile(self, workflow: Workflow) -> CompiledWorkflow:
        """Compiled once per workflow object (a builder graph or path, with the runtime's
        passes), however many calls bring it."""
        if isinstance(workflow, CompiledWorkflow):
            return workflow
        with self._lock:
            held = self._compiled.get(id(workflow))
            if held is None or held[0] is not workflow:
                compiled = load(workflow, self.config.scheduler.passes)
                held = self._compiled[id(workflow)] = (workflow, compiled)
            return held[1]

    def _one(self, workflow: Workflow, question: Question, inputs: Mapping[str, Value] | None,
             rid: str | None, search: SearchOptions) -> tuple[CompiledWorkflow, list[Request]]:
        return self._requests(workflow, [question], "question", inputs, rid, search)

    def _many(self, workflow: Workflow, questions: Iterable[Question],
              search: SearchOptions) -> tuple[CompiledWorkflow, list[Request]]:
        if isinstance(questions, str | Mapping | Request):
            raise ConfigError("questions", "must be a list of questions (for one: run)")
        return self._requests(workflow, questions, "questions[{}]", None, None, search)

    def _requests(self, workflow: Workflow, questions: Iterable[Question], where: str,
                  inputs: Mapping[str, Value] | None, rid: str | None,
                  search: SearchOptions) -> tuple[CompiledWorkflow, list[Request]]:
        """The workflow compiled and the questions checked, before anything is submitted: a
        bad one is a ConfigError naming its field."""
        compiled = self._compile(workflow)
        requests = [_searching(_request(q, where.format(i), inputs, rid), search)
                    for i, q in enumerate(questions)]
        for request in requests:
            initial_variables(compiled.source, request)  # ConfigError("inputs.NAME", ...)
        return compiled, requests


def _request(question: Question, where: str, inputs: Mapping[str, Value] | None,
             rid: str | None) -> Request:
    """A request from a question: text, a FlashRAG line (`{id?, question, golden_answers?,
    inputs?}`) or a `Request`; the id is the caller's (empty: the runtime names it)."""
    if isinstance(question, Request):
        return question
    if isinstance(question, Mapping):
        request = Request.from_json(dict(question), where)
        return request if "id" in question else replace(request, id="")
    if not isinstance(question, str):
        raise ConfigError(where, f"a question is text or a mapping, got "
                          f"{type(question).__name__}")
    if not question.strip():
        raise ConfigError(where, "must be a non-empty string")
    check_text(question, where)
    return Request(id=rid or "", question=question, inputs=dict(inputs or {}))


def _searching(request: Request, search: SearchOptions) -> Request:
    """The request with the call's search options over its own (a mapping's `k`, ...)."""
    return request if search.empty else replace(request, search=search.over(request.search))


def _events(get, future: Future) -> Iterator[Event]:  # noqa: ANN001 - a queue's get
    try:
        event = None
        while not isinstance(event, Finished):
            event = _event(get())
            yield event
    finally:
        future.cancel()  # the consumer stopped early: the request is cancelled


def _event(item: Event | BaseException) -> Event:
    """A stream's next event; the failure to submit its request is raised to its reader."""
    if isinstance(item, BaseException):
        raise item
    return item
