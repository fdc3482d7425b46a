"""Chat turns on the embedded llama.cpp engine with a real GGUF's template (slow: the model).

The packaged Gemma-3-270M GGUF carries no `tokenizer.chat_template`; a copy of it gets one
stamped in (a Gemma 3 format template written in Hugging Face's Jinja conventions), so the
engine reads and renders the template from the GGUF itself. Checked: the turn is the Gemma 3
format; it equals llama.cpp's built-in `gemma` rendering the engine uses for the packaged model;
and greedy answers equal llama-cpp-python's `create_chat_completion` on the same file (which
renders the GGUF's template with its own Jinja formatter)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragraph.ir import Sampling
from ragraph.runtime.llm import GenerationRequest, create_engine
from ragraph.runtime.llm.chat import as_dicts, chat_turn
from tests.llm.gguf_stamp import with_string

pytestmark = pytest.mark.slow

GEMMA3_FORMAT = (
    "{{ bos_token }}{% set ns = namespace(prefix='') %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{% set ns.prefix = (m['content'] | trim) + '\\n\\n' %}"
    "{% else %}{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + ns.prefix + (m['content'] | trim) + '<end_of_turn>\\n' }}"
    "{% set ns.prefix = '' %}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}")
TURNS = [chat_turn("What is the capital of France?", "Answer in one word."),
         chat_turn("Name a large river in Africa."),
         chat_turn("Documents:\nParis is the capital of France.\n\nQuestion: What is the capital "
                   "of France?", "Answer the question with a short answer from the documents.")]
N = 16


@pytest.fixture(scope="module")
def stamped(model_path: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    dst = tmp_path_factory.mktemp("gguf") / "gemma-with-template.gguf"
    return str(with_string(Path(model_path), dst, "tokenizer.chat_template", GEMMA3_FORMAT))


def answers(model_path: str | None, **config: object) -> tuple[str, list]:
    from ragraph.runtime.llm.llamacpp.engine import LlamaCppConfig

    # Serial-exact: each turn alone in an empty KV cache (as create_chat_completion runs it).
    cfg = LlamaCppConfig(model_path=model_path, context_length=512, max_running=1,
                         prefix_slots=0, **config)  # type: ignore[arg-type]

    async def go() -> tuple[str, list]:
        async with create_engine("llamacpp", cfg) as engine:
            results = []
            for i, turn in enumerate(TURNS):
                req = GenerationRequest(f"t{i}", messages=turn, params=Sampling(max_tokens=N))
                results.append(await engine.submit(req).result())
            return engine.chat_template, results  # type: ignore[attr-defined]

    return asyncio.run(go())


def test_the_gguf_template_renders_the_gemma_turn(stamped: str) -> None:
    from ragraph.runtime.llm.llamacpp.chat import chat_template_for
    from ragraph.runtime.llm.llamacpp.model import ContextShape, LlamaModel

    model = LlamaModel(stamped, ContextShape(n_ctx_seq=64, n_batch=64, n_seq_max=1, n_threads=2))
    try:
        template = chat_template_for(None, model.model, model.vocab)
        assert template is not None and "GGUF" in template.source
        text = template.render(TURNS[0])
        ids = model.tokenize(text)
    finally:
        model.close()
    assert text == ("<start_of_turn>user\nAnswer in one word.\n\nWhat is the capital of France?"
                    "<end_of_turn>\n<start_of_turn>model\n")
    assert ids[0] == model.bos and ids.count(model.bos) == 1  # one BOS, not the template's too
    assert 105 in ids and 106 in ids  # <start_of_turn>, <end_of_turn> as special tokens


def test_the_gguf_template_answers_as_the_builtin_one(stamped: str) -> None:
    source, from_gguf = answers(stamped)
    assert "tokenizer.chat_template" in source
    builtin_source, builtin = answers(None)  # the packaged model: llama.cpp's built-in gemma
    assert "built-in 'gemma'" in builtin_source and "carries no template" in builtin_source
    for a, b in zip(from_gguf, builtin, strict=True):
        assert (a.prompt_tokens, a.token_ids, a.text) == (b.prompt_tokens, b.token_ids, b.text)


def test_answers_equal_llama_cpp_pythons_create_chat_completion(stamped: str) -> None:
    from ragraph.runtime.llm.llamacpp.reference import reference_llama

    _, ours = answers(stamped)
    llm = reference_llama(stamped, n_ctx=512)
    try:
        for turn, got in zip(TURNS, ours, strict=True):
            out = llm.create_chat_completion(messages=as_dicts(turn), max_tokens=N,
                                             temperature=0.0)
            assert out["usage"]["prompt_tokens"] == got.prompt_tokens
            assert out["choices"][0]["message"]["content"] == got.text, turn
    finally:
        llm.close()
