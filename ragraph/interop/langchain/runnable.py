"""`RagraphRunnable`: a workflow as a LangChain `Runnable` on an open `ragraph.Runtime`.

Input: the question as text, or a mapping with `question` and the workflow's other inputs
(`{"question": ..., "tone": "formal"}`). Output: the answer text (`Answer.answer`), what a
chain ending in a chat model and `StrOutputParser` gives, so it composes with `|` and fills a
LangGraph state's field. `stream` yields the answer's text as it is generated, in chunks that
add up to exactly what `invoke` returns. A failed request raises `RequestFailed` (its `kind`,
and its `answer` with the path it reached); a bad input is a `ConfigError` naming the field."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig

from ragraph.api.answer import Answer
from ragraph.api.load import Workflow, load
from ragraph.api.runtime import Runtime
from ragraph.errors import ConfigError, RequestFailed
from ragraph.interop.langchain.streaming import AnswerText
from ragraph.runtime.answer_stream import answer_origins

Input = str | Mapping[str, Any]


class RagraphRunnable(Runnable[Input, str]):
    """`workflow` (a `.rag` path, a builder graph or a compiled workflow; compiled with the
    runtime's passes) answered by `runtime`, which the caller opens and closes. `batch` hands
    all its inputs to the runtime's scheduler at once, so they batch together as the lines of
    `ragraph run --input` do; calls from many threads or tasks batch together too."""

    def __init__(self, workflow: Workflow, runtime: Runtime, *, name: str | None = None) -> None:
        self.workflow = load(workflow, runtime.config.scheduler.passes)
        self.runtime = runtime
        self.name = name or self.workflow.name
        self._live = answer_origins(self.workflow.source)

    def invoke(self, input: Input, config: RunnableConfig | None = None,  # noqa: A002
               **kwargs: Any) -> str:
        return self._call_with_config(self._answer, input, config)

    async def ainvoke(self, input: Input, config: RunnableConfig | None = None,  # noqa: A002
                      **kwargs: Any) -> str:
        return await self._acall_with_config(self._aanswer, input, config)

    def batch(self, inputs: list[Input], config: RunnableConfig | list[RunnableConfig] | None = None,
              *, return_exceptions: bool = False, **kwargs: Any) -> list[str]:
        return self._batch_with_config(self._answers, list(inputs), config,
                                       return_exceptions=return_exceptions)

    async def abatch(self, inputs: list[Input],
                     config: RunnableConfig | list[RunnableConfig] | None = None,
                     *, return_exceptions: bool = False, **kwargs: Any) -> list[str]:
        return await self._abatch_with_config(self._aanswers, list(inputs), config,
                                              return_exceptions=return_exceptions)

    def stream(self, input: Input, config: RunnableConfig | None = None,  # noqa: A002
               **kwargs: Any) -> Iterator[str]:
        yield from self._transform_stream_with_config(iter([input]), self._chunks, config)

    async def astream(self, input: Input, config: RunnableConfig | None = None,  # noqa: A002
                      **kwargs: Any) -> AsyncIterator[str]:
        async def one() -> AsyncIterator[Input]:
            yield input

        async for chunk in self._atransform_stream_with_config(one(), self._achunks, config):
            yield chunk

    # -- what the LangChain wrappers call ----------------------------------------------------------

    def _answer(self, value: Input) -> str:
        question, inputs = question_of(value)
        return self.runtime.run(self.workflow, question, inputs=inputs).answer or ""

    async def _aanswer(self, value: Input) -> str:
        question, inputs = question_of(value)
        return (await self.runtime.arun(self.workflow, question, inputs=inputs)).answer or ""

    def _answers(self, values: Sequence[Input]) -> list[str | Exception]:
        return [text_or_error(a) for a in self.runtime.batch(self.workflow, lines(values))]

    async def _aanswers(self, values: Sequence[Input]) -> list[str | Exception]:
        answers = await self.runtime.abatch(self.workflow, lines(values))
        return [text_or_error(a) for a in answers]

    def _chunks(self, values: Iterator[Input]) -> Iterator[str]:
        question, inputs = question_of(next(values))
        text = AnswerText(self._live)
        for event in self.runtime.stream(self.workflow, question, inputs=inputs):
            chunk = text.chunk(event)
            if chunk is not None:
                yield chunk

    async def _achunks(self, values: AsyncIterator[Input]) -> AsyncIterator[str]:
        question, inputs = question_of(await anext(values))
        text = AnswerText(self._live)
        async for event in self.runtime.astream(self.workflow, question, inputs=inputs):
            chunk = text.chunk(event)
            if chunk is not None:
                yield chunk


def as_runnable(workflow: Workflow, runtime: Runtime, *, name: str | None = None
                ) -> RagraphRunnable:
    """`workflow` as a LangChain Runnable answered by the open `runtime`."""
    return RagraphRunnable(workflow, runtime, name=name)


def question_of(value: Input) -> tuple[Any, dict[str, Any]]:
    """The question and the workflow's other inputs (the runtime checks both)."""
    if isinstance(value, Mapping):
        if "question" not in value:
            raise ConfigError("input.question", "a mapping input needs a question (its other "
                              "keys are the workflow's inputs)")
        return value["question"], {k: v for k, v in value.items() if k != "question"}
    return value, {}


def lines(values: Sequence[Input]) -> list[Mapping[str, Any] | Any]:
    """A batch's inputs as the runtime's questions (FlashRAG lines when they have inputs)."""
    out = []
    for value in values:
        question, inputs = question_of(value)
        out.append({"question": question, "inputs": inputs} if inputs else question)
    return out


def text_or_error(answer: Answer) -> str | Exception:
    try:
        return answer.raise_for_error().answer or ""
    except RequestFailed as err:
        return err

