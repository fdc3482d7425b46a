"""Every error ragraph reports survives a trip to another process and back (a bench's index build
runs in a process of its own, Ray tasks on other workers): the same class, message and fields,
whatever its constructor takes."""

from __future__ import annotations

import pickle

import pytest

from ragraph.errors import ConfigError, RequestFailed, Span, WorkflowError
from ragraph.eval.records import DatasetError
from ragraph.ir.template import TemplateError


@pytest.mark.parametrize("error", [
    ConfigError("--scale", "an index of this size does not fit"),
    RequestFailed("the engine stopped", "engine", answer={"partial": "text"}),
    DatasetError("questions.jsonl:3", "no 'question' field"),
    TemplateError("unclosed {", offset=7, hint="close it"),
    WorkflowError("unknown node 'x'", span=Span(2, 5), source="a\nb = x\n", node="b",
                  hint="define x"),
], ids=lambda e: type(e).__name__)
def test_an_error_pickles_with_its_class_message_and_fields(error) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and str(back) == str(error)
    assert vars(back) == vars(error)
