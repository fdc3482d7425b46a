"""The OpenAI-compatible engine's chat endpoint, upstream key and served context length, against
a fake server that answers as llama-server, vLLM and SGLang do (real sockets, canned bodies).
The chunk shapes are the ones each server documents (see `openai_wire`)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from ragraph.errors import ConfigError, EngineError
from ragraph.ir import Sampling
from ragraph.runtime.config import RuntimeConfig
from ragraph.runtime.llm import GenerationRequest, create_engine
from ragraph.runtime.llm.chat import chat_turn
from ragraph.runtime.llm.http.openai import OpenAIHttpConfig
from ragraph.runtime.llm.settings import LlmConfig
from tests.llm.fakeserver import FakeServer, sse

TURN = chat_turn("What is x?", "Be brief.")
STOP = {"finish_reason": "stop", "index": 0, "delta": {}}
# The same answer, " forty two", as each server streams it.
LLAMA_SERVER = sse(
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None},
                  "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": " forty"}, "finish_reason": None}],
     "timings": {"cache_n": 3, "prompt_n": 9}},
    {"choices": [{"index": 0, "delta": {"content": " two"}, "finish_reason": None}]},
    {"choices": [STOP], "usage": {"prompt_tokens": 12, "completion_tokens": 2}})
VLLM = sse(
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                  "logprobs": None, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": " forty"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": " two"}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 2,
                              "prompt_tokens_details": {"cached_tokens": 8}}})
SGLANG = sse(*({"choices": [{"index": 0, "delta": {"role": "assistant", "content": piece,
                                                   "reasoning_content": None},
                             "logprobs": None, "finish_reason": reason}]}
               for piece, reason in ((" forty", None), (" two", None), ("", "stop"))))
COMPLETION = sse({"choices": [{"text": " forty two", "finish_reason": "stop"}]})


def served(body: bytes, *requests: GenerationRequest, gets: dict | None = None,
           **config: object) -> tuple[list, FakeServer, int]:
    """Results of `requests` (exceptions for failed ones), the server, the engine's context."""
    async def go() -> tuple[list, FakeServer, int]:
        async with FakeServer(lambda r: (200, body), gets=gets) as srv:
            cfg = OpenAIHttpConfig(base_url=srv.url, **config)  # type: ignore[arg-type]
            async with create_engine("openai", cfg) as engine:
                out = []
                for r in requests:
                    try:
                        out.append(await engine.submit(r).result())
                    except EngineError as e:
                        out.append(e)
                return out, srv, engine.context_length

    return asyncio.run(go())


def chat(rid: str = "c", **params: object) -> GenerationRequest:
    return GenerationRequest(rid, messages=TURN, params=Sampling(max_tokens=8, **params))


@pytest.mark.parametrize("body", [LLAMA_SERVER, VLLM, SGLANG], ids=["llama-server", "vllm",
                                                                     "sglang"])
def test_a_chat_turn_streams_from_each_servers_chunks(body):
    (result,), srv, _ = served(body, chat())
    assert result.text == " forty two" and result.finish_reason == "stop"
    assert srv.paths == ["/v1/chat/completions"]
    sent = srv.requests[0]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "What is x?"}]
    assert "prompt" not in sent and sent["stream"] is True


def test_usage_and_cached_tokens_come_from_the_usage_chunk():
    (result,), _, _ = served(VLLM, chat())
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (12, 2, 8)


def test_chat_logprobs_come_from_the_content_list():
    body = sse({"choices": [{"index": 0, "delta": {"content": " a"},
                             "logprobs": {"content": [{"token": " a", "logprob": -0.25}]},
                             "finish_reason": "stop"}]})
    (result,), srv, _ = served(body, chat(logprobs=True))
    assert result.logprobs == (-0.25,)
    assert srv.requests[0]["logprobs"] is True


def test_a_completion_goes_where_the_endpoint_flag_says():
    prompt = GenerationRequest("p", prompt="Paris is", params=Sampling(max_tokens=4))
    _, default, _ = served(COMPLETION, prompt)
    assert default.paths == ["/v1/completions"] and default.requests[0]["prompt"] == "Paris is"
    (result,), chat_only, _ = served(VLLM, prompt, endpoint="chat")
    assert chat_only.paths == ["/v1/chat/completions"]
    assert chat_only.requests[0]["messages"] == [{"role": "user", "content": "Paris is"}]
    assert result.text == " forty two"
    _, turn, _ = served(VLLM, chat(), endpoint="completions")
    assert turn.paths == ["/v1/chat/completions"], "a chat turn always uses the chat endpoint"


def test_the_context_length_is_read_from_llama_server_props():
    props = {"/props": {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 4}}
    _, _, ctx = served(VLLM, gets=props)
    assert ctx == 4096


def test_the_context_length_is_read_from_vllm_models():
    models = {"/v1/models": {"object": "list", "data": [{"id": "m", "max_model_len": 8192}]}}
    _, _, ctx = served(VLLM, gets=models)
    assert ctx == 8192


def test_a_configured_context_length_wins_and_silence_leaves_it_unknown():
    props = {"/props": {"default_generation_settings": {"n_ctx": 4096}}}
    assert served(VLLM, gets=props, context_length=1000)[2] == 1000
    assert served(VLLM)[2] == 0  # the server says nothing: unknown


def test_the_upstream_key_is_a_bearer_header_and_never_printed(monkeypatch, caplog):
    monkeypatch.setenv("UPSTREAM_KEY", "sk-secret-123")
    config = OpenAIHttpConfig.of(LlmConfig(engine="openai", url="http://127.0.0.1:9",
                                           api_key_env="UPSTREAM_KEY"))
    assert config.api_key == "sk-secret-123"
    assert "sk-secret" not in repr(config) and "sk-secret" not in str(config)
    refused = sse(done=False)  # a server that answers and drops the stream
    with caplog.at_level(logging.DEBUG):
        (err,), srv, _ = served(refused, chat(), api_key="sk-secret-123")
    assert srv.headers[0]["authorization"] == "Bearer sk-secret-123"
    assert isinstance(err, EngineError) and "sk-secret" not in str(err)
    assert "sk-secret" not in caplog.text


def test_an_unset_key_variable_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    llm = LlmConfig(engine="openai", url="http://127.0.0.1:9", api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(ConfigError, match="NO_SUCH_KEY_VAR is not set"):
        OpenAIHttpConfig.of(llm)


def test_server_options_are_checked_where_they_are_given():
    with pytest.raises(ConfigError, match="api_key_env"):
        RuntimeConfig.of(engine="sim", api_key_env="KEY")
    with pytest.raises(ConfigError, match="openai_endpoint"):
        RuntimeConfig.of(engine="openai", url="http://x", openai_endpoint="responses")
    with pytest.raises(ConfigError, match="chat_template"):
        RuntimeConfig.of(engine="openai", url="http://x", chat_template="gemma")
    with pytest.raises(ConfigError, match="ctx"):
        RuntimeConfig.of(engine="llamacpp", ctx=0)
