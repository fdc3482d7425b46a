"""SGLang adapter: request/response mapping without sglang, native /generate on a fake server."""

import asyncio

import pytest

from ragraph.errors import ConfigError, EngineError
from ragraph.ir import Sampling
from ragraph.runtime.llm import GenerationRequest, create_engine
from ragraph.runtime.llm.http.base import StreamState
from ragraph.runtime.llm.http.sglang import SGLangConfig, SGLangEngine, SGLangHttpEngine
from ragraph.runtime.llm.http.sglang_map import (
    ChunkFolder,
    generate_kwargs,
    generate_payload,
    sampling_params_dict,
)
from tests.llm.fakeserver import FakeServer, sse

PARAMS = Sampling(max_tokens=7, temperature=0.5, top_p=0.9, stop=("\n",), seed=3,
                        logprobs=True)


def test_sampling_params_use_sglang_names() -> None:
    assert sampling_params_dict(PARAMS) == {
        "max_new_tokens": 7, "temperature": 0.5, "top_p": 0.9, "stop": ["\n"], "sampling_seed": 3,
    }
    assert "sampling_seed" not in sampling_params_dict(Sampling())


def test_engine_kwargs_and_http_payload() -> None:
    text = GenerationRequest("r1", prompt="Hi", params=PARAMS)
    ids = GenerationRequest("r2", prompt_ids=(5, 6), params=PARAMS)
    kw = generate_kwargs(text)
    assert kw["prompt"] == "Hi" and kw["stream"] is True and kw["rid"] == "r1"
    assert kw["return_logprob"] is True
    assert generate_kwargs(ids)["input_ids"] == [5, 6]
    payload = generate_payload(text)
    assert payload["text"] == "Hi" and "prompt" not in payload


def chunk(text: str | None, ids: list[int], finish: dict | None = None, **meta: object) -> dict:
    return {"text": text, "output_ids": ids,
            "meta_info": {"finish_reason": finish, "prompt_tokens": 4, **meta}}


def test_cumulative_chunks_become_one_event_per_token() -> None:
    state = StreamState(GenerationRequest("r", prompt="x", params=PARAMS))
    folder = ChunkFolder(state)
    lp = [[-0.5, 11, None], [-0.25, 12, None], [-1.0, 13, None]]
    ev1 = folder.apply(chunk(" Par", [11], output_token_logprobs=lp[:1]))
    ev2 = folder.apply(chunk(None, [11, 12], output_token_logprobs=lp[:2]))  # text deferred
    ev3 = folder.apply(chunk(" Paris!", [11, 12, 13], {"type": "stop", "matched": 1},
                             completion_tokens=3, cached_tokens=2, output_token_logprobs=lp))
    assert [e.token_id for e in ev1 + ev2 + ev3] == [11, 12, 13]
    assert "".join(e.text for e in ev1 + ev2 + ev3) == " Paris!"
    assert [e.logprob for e in ev1 + ev2 + ev3] == [-0.5, -0.25, -1.0]
    r = state.result(state.finish_reason or "")
    assert (r.finish_reason, r.prompt_tokens, r.completion_tokens, r.cached_tokens) == ("stop", 4, 3, 2)


def test_incremental_chunks() -> None:
    state = StreamState(GenerationRequest("r", prompt="x"))
    folder = ChunkFolder(state, incremental=True)
    folder.apply(chunk(" a", [1]))
    folder.apply(chunk(" b", [2], {"type": "length"}))
    assert state.text == " a b" and state.token_ids == [1, 2] and state.finish_reason == "length"


def test_rejection_is_an_error_but_our_abort_is_not() -> None:
    rejected = chunk("", [], {"type": "abort", "message": "input is longer than the context (8192)"})
    with pytest.raises(EngineError, match="8192"):
        ChunkFolder(StreamState(GenerationRequest("r", prompt="x"))).apply(rejected)
    state = StreamState(GenerationRequest("r", prompt="x"))
    ChunkFolder(state).apply(rejected, we_aborted=True)
    assert state.finish_reason == "abort"


def test_in_process_engine_without_sglang_says_how_to_install() -> None:
    async def main() -> None:
        await SGLangEngine(SGLangConfig(model_path="meta-llama/Llama-3.1-8B-Instruct")).start()

    with pytest.raises(EngineError, match=r"ragraph\[gpu\]|GPU"):
        asyncio.run(main())


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="model_path"):
        SGLangConfig()
    with pytest.raises(ConfigError, match="config"):
        create_engine("sglang")
    assert isinstance(create_engine("sglang", SGLangConfig(mode="http")), SGLangHttpEngine)


def run_http(body: bytes, status: int = 200) -> tuple[list, object, list]:
    async def main() -> tuple[list, object, list]:
        async with FakeServer(lambda _req: (status, body)) as srv:
            async with SGLangHttpEngine(SGLangConfig(mode="http", base_url=srv.url)) as eng:
                stream = eng.submit(GenerationRequest("q", prompt="Hi", params=PARAMS))
                events = [e async for e in stream]
                return events, await stream.result(), srv.requests

    return asyncio.run(main())


def test_native_http_generate_streams_tokens() -> None:
    body = sse(chunk(" Hel", [7]), chunk(" Hello", [7, 8], {"type": "length"}, completion_tokens=2))
    events, result, requests = run_http(body)
    assert [e.token_id for e in events] == [7, 8]
    assert result.text == " Hello" and result.finish_reason == "length"
    assert requests[0]["text"] == "Hi" and requests[0]["sampling_params"]["sampling_seed"] == 3


@pytest.mark.parametrize(
    ("body", "status", "match"),
    [
        (b"this is not SSE\n", 200, "not server-sent events"),
        (b"data: {not json\n\n", 200, "not JSON"),
        (sse({"error": {"message": "boom"}}), 200, "boom"),
        (sse(chunk(" a", [1]), done=False), 200, "before \\[DONE\\]"),
        (b'{"detail": "bad"}', 400, "HTTP 400"),
    ],
)
def test_native_http_failures_fail_the_request(body: bytes, status: int, match: str) -> None:
    with pytest.raises(EngineError, match=match):
        run_http(body, status)
