"""Request bodies and streamed chunks of the OpenAI-compatible API, both endpoints.

`/v1/completions` takes `prompt` and streams `choices[0].text`; `/v1/chat/completions` takes
`messages` (the server renders them with the model's chat template) and streams
`choices[0].delta.content`. What the servers send differs in details (checked against their
documentation and source, and against llama-server and llama_cpp.server in the tests):
- the first chat chunk may carry only `delta.role` ("assistant") with `content` absent, null
  (llama-server) or "" (vLLM); SGLang repeats `role` and sends `reasoning_content: null` in every
  chunk. Reasoning models put their thinking in `delta.reasoning_content` (llama-server, vLLM,
  SGLang), which is not the answer and is not kept.
- usage: with `stream_options.include_usage` OpenAI, vLLM and SGLang send a last chunk with empty
  `choices` and `usage`; llama-server adds `usage` to its finishing chunk as well, plus
  `timings` (`cache_n`: prompt tokens served from its cache) on every chunk. Cached prompt tokens
  are `usage.prompt_tokens_details.cached_tokens` where reported (vLLM only with
  `--enable-prompt-tokens-details`).
- logprobs: completions use the legacy `logprobs.token_logprobs` list; chat uses
  `logprobs.content[i].logprob` (llama-server returns that shape from /v1/completions too).
"""

from __future__ import annotations

from typing import Any

from ragraph.runtime.llm.chat import ChatMessage, as_dicts
from ragraph.runtime.llm.http.base import StreamState
from ragraph.runtime.llm.http.wire import count, malformed, whole
from ragraph.runtime.llm.protocol import GenerationRequest, TokenEvent

ENDPOINTS = ("completions", "chat")
PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def endpoint_for(request: GenerationRequest, default: str) -> str:
    """A chat turn goes to the chat endpoint; a completion where the config says (a server
    that offers only chat takes it as one user message)."""
    if request.messages is not None:
        return "chat"
    if request.prompt_ids is not None:
        return "completions"  # token ids have no chat form
    return default


def payload(request: GenerationRequest, endpoint: str, model: str,
            include_usage: bool) -> dict[str, Any]:
    """The JSON body of a streamed call to `endpoint` for `request`."""
    p = request.params
    body: dict[str, Any] = {"model": model, "max_tokens": p.max_tokens,
                            "temperature": p.temperature, "top_p": p.top_p, "stream": True}
    if endpoint == "chat":
        messages = request.messages or (ChatMessage("user", request.prompt or ""),)
        body["messages"] = as_dicts(messages)
    else:
        body["prompt"] = (request.prompt if request.prompt is not None
                          else list(request.prompt_ids or ()))
    if p.stop:
        body["stop"] = list(p.stop)
    if p.seed is not None:
        body["seed"] = p.seed
    if p.logprobs:
        body["logprobs"] = True if endpoint == "chat" else 1
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    return body


def apply_chunk(obj: dict[str, Any], state: StreamState, endpoint: str) -> TokenEvent | None:
    """Fold one streamed chunk into `state`; the event to emit, if the chunk carried text."""
    _usage(obj, state)
    choices = obj.get("choices")
    if not isinstance(choices, list):
        raise malformed(f"chunk has no 'choices' list: {str(obj)[:200]}")
    if not choices:
        return None  # the usage-only chunk
    choice = choices[0]
    if not isinstance(choice, dict):
        raise malformed(f"chunk has a malformed choice: {str(choice)[:200]}")
    text = _chat_text(choice) if endpoint == "chat" else _completion_text(choice)
    reason = choice.get("finish_reason")
    if reason is not None:
        state.finish_reason = "length" if reason == "length" else "stop"
    logprob = _first_logprob(choice.get("logprobs"))
    if not text and logprob is None:
        return None
    state.text += text
    state.completion_tokens += 1
    if logprob is not None:
        state.logprobs.append(logprob)
    return TokenEvent(None, text, logprob)


def _usage(obj: dict[str, Any], state: StreamState) -> None:
    usage = obj.get("usage")
    if not isinstance(usage, dict):
        return
    state.prompt_tokens = count(usage, "prompt_tokens", "usage", state.prompt_tokens)
    state.completion_tokens = count(usage, "completion_tokens", "usage", state.completion_tokens)
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        state.cached_tokens = count(details, "cached_tokens", "usage.prompt_tokens_details", 0)


def _completion_text(choice: dict[str, Any]) -> str:
    text = choice.get("text", "")
    if not isinstance(text, str) and text is not None:
        raise malformed(f"chunk has a malformed choice: {str(choice)[:200]}")
    return text or ""


def _chat_text(choice: dict[str, Any]) -> str:
    delta = choice.get("delta", {})
    if delta is None:
        return ""
    if not isinstance(delta, dict):
        raise malformed(f"chunk has a malformed delta: {str(choice)[:200]}")
    text = delta.get("content")
    if text is not None and not isinstance(text, str):
        raise malformed(f"chunk has a malformed delta.content: {str(choice)[:200]}")
    return text or ""


def _first_logprob(logprobs: object) -> float | None:
    if not isinstance(logprobs, dict):
        return None
    legacy = logprobs.get("token_logprobs")
    if isinstance(legacy, list) and legacy and isinstance(legacy[0], int | float):
        return float(legacy[0])
    content = logprobs.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        value = content[0].get("logprob")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def served_context(props: object, models: object) -> int | None:
    """The context length a server states: llama-server's `/props`
    `default_generation_settings.n_ctx` (per slot), else vLLM's (and SGLang's) `/v1/models`
    `data[0].max_model_len`; None when neither says."""
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        if isinstance(settings, dict) and settings.get("n_ctx") is not None:
            return whole(settings["n_ctx"], "/props default_generation_settings.n_ctx")
    data = models.get("data") if isinstance(models, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        length = data[0].get("max_model_len")
        if length is not None:
            return whole(length, "/v1/models data[0].max_model_len")
    return None
