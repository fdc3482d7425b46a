"""Request validation: a bad field raises an error naming it (ConfigError for the request,
WorkflowError for its sampling, which is the IR's `Sampling`)."""

import pytest

from ragraph.errors import ConfigError, WorkflowError
from ragraph.ir import Sampling
from ragraph.runtime.llm import EngineCounters, GenerationRequest


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 2.5}, "max_tokens"),
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"stop": ("",)}, "stop"),
        ({"seed": "x"}, "seed"),
    ],
)
def test_sampling_rejects_bad_fields(kwargs: dict, field: str) -> None:
    with pytest.raises(WorkflowError) as err:
        Sampling(**kwargs)
    assert err.value.message.startswith(f"{field} ")


def test_stop_list_becomes_tuple() -> None:
    assert Sampling(stop=["\n"]).stop == ("\n",)  # type: ignore[arg-type]


def test_request_needs_exactly_one_prompt_form() -> None:
    with pytest.raises(ConfigError, match="prompt"):
        GenerationRequest("r")
    with pytest.raises(ConfigError, match="prompt"):
        GenerationRequest("r", prompt="a", prompt_ids=(1,))
    with pytest.raises(ConfigError, match="rid"):
        GenerationRequest("", prompt="a")
    with pytest.raises(ConfigError, match="prompt_ids"):
        GenerationRequest("r", prompt_ids=(-1,))


def test_empty_prompt_is_a_valid_request_that_fails_later() -> None:
    # The engine fails only that request's stream (tested in the conformance suite).
    assert GenerationRequest("r", prompt="").prompt == ""


def test_engine_counters_snapshot_stays_put_while_the_engine_counts() -> None:
    tally = EngineCounters()
    tally.requests += 1
    tally.count_finish("abort")
    seen = tally.snapshot(simulated=True)
    tally.requests += 1
    tally.count_finish("stop")
    tally.count_finish("error")
    assert (seen.requests, seen.aborted, seen.finished, seen.simulated) == (1, 1, 0, True)
    assert (tally.requests, tally.finished, tally.failed) == (2, 1, 1)


def test_engines_say_whether_batching_can_change_an_answer():
    """The promise the exactness tests rely on: the sim engine and llama.cpp serial-exact are
    batch-invariant; batched llama.cpp and any server are not; a router only if all its engines."""
    from ragraph.runtime.distributed.replicas import ReplicaRouter
    from ragraph.runtime.llm import create_engine
    from ragraph.runtime.llm.http.openai import OpenAIHttpConfig
    from ragraph.runtime.llm.llamacpp.engine import LlamaCppConfig

    assert create_engine("sim").batch_invariant
    assert ReplicaRouter([create_engine("sim"), create_engine("sim")]).batch_invariant
    assert create_engine("llamacpp", LlamaCppConfig(max_running=1, prefix_slots=0)).batch_invariant
    assert not create_engine("llamacpp", LlamaCppConfig()).batch_invariant
    assert not create_engine("llamacpp", LlamaCppConfig(max_running=1)).batch_invariant
    http = create_engine("openai", OpenAIHttpConfig(base_url="http://127.0.0.1:9"))
    assert not http.batch_invariant
    assert not ReplicaRouter([create_engine("sim"), http]).batch_invariant


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("prefix_reuse", [False, True])
def test_the_settings_promise_what_the_llamacpp_engine_they_build_promises(exact, prefix_reuse):
    """tune reads the promise from the settings alone (it holds no engine): the engine those
    settings build, at any concurrency, must say the same, and only --exact promises it."""
    from ragraph.runtime.llm.registry import engine_for
    from ragraph.runtime.llm.settings import LlmConfig

    llm = LlmConfig(engine="llamacpp", exact=exact, prefix_reuse=prefix_reuse)
    for in_flight in (1, 4, 32):
        assert engine_for(llm, in_flight).batch_invariant is llm.batch_invariant is exact


def test_one_running_llamacpp_sequence_beside_stored_prefixes_is_not_serial_exact():
    # A prompt may start from another's stored KV, computed in other batches: not alone.
    from ragraph.runtime.llm import create_engine
    from ragraph.runtime.llm.llamacpp.config import LlamaCppConfig

    assert not LlamaCppConfig(max_running=1, prefix_slots=4).batch_invariant
    assert LlamaCppConfig(max_running=1, prefix_slots=0).batch_invariant
    for config in (LlamaCppConfig(max_running=1, prefix_slots=4), LlamaCppConfig(),
                   LlamaCppConfig(max_running=1, prefix_slots=0)):
        assert create_engine("llamacpp", config).batch_invariant is config.batch_invariant


def test_engines_say_whose_code_forms_their_batches():
    """The conformance suite holds an engine whose batches ragraph forms to the first tokens of
    each answer, and a server's (which batches as it sees fit) to each request's own stream."""
    from ragraph.runtime.distributed.replicas import ReplicaRouter
    from ragraph.runtime.llm import create_engine
    from ragraph.runtime.llm.http.openai import OpenAIHttpConfig
    from ragraph.runtime.llm.http.sglang import SGLangConfig
    from ragraph.runtime.llm.llamacpp.config import LlamaCppConfig

    assert create_engine("sim").schedules_batches
    assert create_engine("llamacpp", LlamaCppConfig()).schedules_batches
    http = create_engine("openai", OpenAIHttpConfig(base_url="http://127.0.0.1:9"))
    assert not http.schedules_batches
    assert not create_engine("sglang", SGLangConfig(mode="http")).schedules_batches
    assert not create_engine("sglang", SGLangConfig(model_path="m")).schedules_batches
    assert ReplicaRouter([create_engine("sim"), create_engine("sim")]).schedules_batches
    assert not ReplicaRouter([create_engine("sim"), http]).schedules_batches
