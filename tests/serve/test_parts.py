"""The server's decisions as pure functions: which generation streams the answer and how its
deltas add up, when the queue is full and how long to wait, what settings are valid."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragraph.api.load import compile_catalog
from ragraph.errors import ConfigError
from ragraph.runtime.answer_stream import AnswerDeltas, answer_origins
from ragraph.runtime.catalog import Catalog
from ragraph.serve.admission import Admission, retry_after_s
from ragraph.serve.bodies import HttpError, parse_chat, parse_completion, parse_run
from ragraph.serve.settings import ServeSettings
from tests.serve.conftest import graphs


@pytest.mark.parametrize("workflow, origins", [
    ("oneshot", {"answer"}), ("hyde", {"answer"}), ("irg", set()), ("multistep", {"answer"}),
    ("flare", {"regenerate"}), ("adaptive", {"direct", "single", "multi"}),
])
def test_answer_streams_only_from_a_generation_that_ends_the_workflow(workflow, origins):
    assert answer_origins(graphs((workflow,))[workflow]) == origins


@given(st.lists(st.text(alphabet=" \nab.", max_size=6), max_size=12))
def test_deltas_add_up_to_the_stripped_text(pieces):
    deltas = AnswerDeltas()
    sent = "".join(deltas.add(p) for p in pieces)
    answer = "".join(pieces).strip()
    assert sent + deltas.finish(answer) == answer
    assert sent == sent.strip()  # no whitespace is sent that the answer might not keep


def test_finish_sends_a_whole_answer_nothing_was_streamed_of():
    assert AnswerDeltas().finish("Paris") == "Paris"


def test_queue_admits_up_to_concurrency_plus_queue():
    admission = Admission(concurrency=4, max_queue=2)
    admission.check(5, None)
    with pytest.raises(HttpError) as refused:
        admission.check(6, 2.0)
    assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "2"


@pytest.mark.parametrize("in_flight, concurrency, latency, wait", [
    (6, 4, None, 1), (6, 4, 2.0, 2), (100, 4, 2.0, 49), (1000, 1, 5.0, 60), (1, 8, 0.01, 1)])
def test_retry_after_is_the_queue_ahead_over_the_service_rate(in_flight, concurrency, latency,
                                                              wait):
    assert retry_after_s(in_flight, concurrency, latency) == wait


@pytest.mark.parametrize("field, value, flag", [
    ("port", 70000, "--port"), ("max_queue", 0, "--max-queue"),
    ("request_timeout_s", 0, "--request-timeout"), ("api_key", " ", "--api-key")])
def test_settings_errors_name_the_flag(field, value, flag):
    with pytest.raises(ConfigError, match=flag):
        ServeSettings(**{field: value})


def test_loopback_is_the_default():
    assert ServeSettings().loopback and ServeSettings(host="localhost").loopback
    assert not ServeSettings(host="0.0.0.0").loopback


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return compile_catalog(graphs(("hyde", "irg")), "-O0")


def test_bodies_take_the_last_user_message_and_content_parts(catalog):
    ask = parse_chat({"model": "hyde", "messages": [
        {"role": "user", "content": "first"}, {"role": "assistant", "content": "..."},
        {"role": "user", "content": [{"type": "text", "text": "Who "}, {"type": "text",
                                                                          "text": "won?"}]}]},
        catalog)
    assert ask.question == "Who won?" and ask.workflow == "hyde" and not ask.stream
    assert parse_completion({"model": "irg", "prompt": ["Why?"], "stream": True},
                            catalog).stream


def test_run_bodies_pass_workflow_inputs_and_check_them(catalog):
    ask = parse_run({"workflow": "irg", "input": {"question": "q", "answer": "seed"}}, catalog)
    assert dict(ask.inputs) == {"answer": "seed"}
    with pytest.raises(HttpError, match="input.answer: must be a string"):
        parse_run({"workflow": "irg", "input": {"question": "q", "answer": [1]}}, catalog)
