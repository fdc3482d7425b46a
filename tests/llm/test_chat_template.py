"""Chat turns rendered with a model's template (llama.cpp engine), with a fake Jinja template and
llama.cpp's built-in ones: no model needed. The real GGUF template is tested in
test_chat_gguf.py (slow)."""

from __future__ import annotations

import pytest

from ragraph.errors import ConfigError, EngineError
from ragraph.runtime.llm.chat import ChatMessage, chat_turn, prompt_text, stand_in
from tests.real import need_module

need_module("llama_cpp")

from ragraph.runtime.llm.llamacpp.chat import (  # noqa: E402 - after need_module
    builtin_names,
    builtin_template,
    jinja_template,
)

# A template in Hugging Face's conventions, as a GGUF's tokenizer.chat_template is written.
FAKE = ("{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] | trim }}[/]"
        "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}")


def test_a_jinja_template_renders_the_turn_without_its_bos_text():
    template = jinja_template(FAKE, bos="<s>", eos="</s>", source="fake")
    text = template.render(chat_turn("  What is x?\n", "Be brief."))
    # The tokenizer adds BOS (as llama-server strips the template's): one BOS either way.
    assert text == "[system]Be brief.[/][user]What is x?[/][assistant]"


def test_a_template_that_refuses_the_turn_fails_that_request():
    refusing = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system') }}{% endif %}"
    template = jinja_template(refusing, bos="", eos="", source="strict")
    with pytest.raises(EngineError, match="no system"):
        template.render(chat_turn("q", "s"))
    assert template.render(chat_turn("q")) == ""


def test_a_template_that_is_not_jinja_is_a_config_error():
    with pytest.raises(ConfigError, match="chat_template"):
        jinja_template("{% for m in messages %}", bos="", eos="", source="broken")


def test_a_template_runs_in_jinja_sandbox():
    """A GGUF's template comes with a downloaded file: it may not reach Python internals."""
    escape = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(EngineError):
        jinja_template(escape, bos="", eos="", source="hostile").render(chat_turn("q"))


def test_llama_cpp_gemma_template_is_gemma_3_format():
    assert "gemma" in builtin_names()
    text = builtin_template("gemma", "built-in").render(chat_turn("Hello", "Be brief."))
    assert text == ("<start_of_turn>user\nBe brief.\n\nHello<end_of_turn>\n"
                    "<start_of_turn>model\n")


def test_flat_text_is_the_turn_contents_in_template_order():
    """What the scheduler and prefix-layout compute on: [system][SEPARATOR][user], the text
    Gemma's template places between its markers."""
    turn = chat_turn("{docs} Question", "Answer briefly.")
    gemma = builtin_template("gemma", "built-in").render(turn)
    assert prompt_text(turn) in gemma


def test_the_simulated_stand_in_says_what_it_is():
    turn = (ChatMessage("system", "s"), ChatMessage("user", "u"))
    assert stand_in(turn) == "<|system|>\ns\n<|user|>\nu\n<|assistant|>\n"
    assert stand_in(turn) != prompt_text(turn)


def no_specials() -> tuple[str, str]:
    return "<s>", "</s>"


def test_which_template_a_model_gets(tmp_path):
    from ragraph.runtime.llm.llamacpp.chat import no_template, select_template

    own = select_template(None, FAKE, "llama", no_specials)
    assert own is not None and "GGUF" in own.source
    gemma = select_template(None, None, "gemma3", no_specials)
    assert gemma is not None and "built-in 'gemma'" in gemma.source
    assert select_template(None, None, "llama", no_specials) is None  # no template at all
    assert "--chat-template" in str(no_template("/models/x.gguf"))
    chosen = select_template("chatml", FAKE, "gemma3", no_specials)  # the flag wins
    assert chosen is not None and "<|im_start|>" in chosen.render(chat_turn("q"))
    path = tmp_path / "t.jinja"
    path.write_text(FAKE, encoding="utf-8")
    from_file = select_template(str(path), None, "llama", no_specials)
    assert from_file is not None and from_file.render(chat_turn("q")) == "[user]q[/][assistant]"
    with pytest.raises(ConfigError, match="neither a file nor one of llama.cpp's built-in"):
        select_template("no-such-template", None, "llama", no_specials)
