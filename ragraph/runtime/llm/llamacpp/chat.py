"""Chat turns on the embedded llama.cpp engine: the model's own template renders the messages
into prompt text, which is then tokenized like any completion prompt.

Which template (`chat_template_for`):
- `--chat-template FILE`: a Jinja template file; `--chat-template NAME`: one of llama.cpp's
  built-in templates (`gemma`, `chatml`, `llama3`, ...; `llama_chat_builtin_templates`).
- otherwise the GGUF's `tokenizer.chat_template`, rendered by llama-cpp-python's sandboxed
  `Jinja2ChatFormatter` (what `Llama.create_chat_completion` uses for a GGUF's template);
- a Gemma GGUF without one (the packaged Gemma-3-270M is a base model whose GGUF has none) gets
  llama.cpp's built-in `gemma` template (`<start_of_turn>user\n[system\n\n]user<end_of_turn>\n
  <start_of_turn>model\n`), the one chat format of Gemma's instruction-tuned models, whose
  special tokens every Gemma vocabulary has. Another GGUF without a template cannot take chat
  turns: the error says what to give.

BOS: a Jinja template writes `bos_token` itself; the rendered text loses that leading BOS and
the tokenizer adds it (when the model wants one), as llama.cpp's server does, so a turn gets one
BOS whichever template rendered it. The rendered text is tokenized whole with special tokens
parsed, as `create_chat_completion` and llama-server do: the scaffolding, the system message and
the documents before the question tokenize the same in every request, so a later request's turn
shares its [BOS][turn markers][system][documents] tokens with the prefix store.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass

import llama_cpp

from ragraph.errors import ConfigError, EngineError
from ragraph.runtime.llm.chat import Chat, as_dicts

# Families with one chat format, which a GGUF without a template still gets (see the module
# docstring): llama.cpp's built-in template of that format, by `general.architecture`.
FAMILY_TEMPLATES = {"gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma"}


@dataclass(frozen=True)
class ChatTemplate:
    """How this model's chat turns become prompt text. `source` says which template it is."""

    source: str
    render: Callable[[Chat], str]


def builtin_names() -> tuple[str, ...]:
    n = llama_cpp.llama_chat_builtin_templates(None, 0)
    names = (ctypes.c_char_p * n)()
    llama_cpp.llama_chat_builtin_templates(names, n)
    return tuple(name.decode() for name in names)


def chat_template_for(choice: str | None, model: ctypes.c_void_p,
                      vocab: ctypes.c_void_p) -> ChatTemplate | None:
    """The template of `choice` (a file or a built-in name), else the GGUF's own, else its
    family's; None when the model has none (its chat turns then fail, saying so)."""
    own = llama_cpp.llama_model_chat_template(model, None)
    return select_template(choice, own.decode("utf-8") if own else None, _architecture(model),
                           lambda: _special_texts(vocab))


def select_template(choice: str | None, own: str | None, architecture: str,
                    special: Callable[[], tuple[str, str]]) -> ChatTemplate | None:
    """`special` gives the model's BOS and EOS texts (what a Jinja template may write)."""
    if choice is not None:
        if os.path.isfile(choice):
            with open(choice, encoding="utf-8") as f:
                return jinja_template(f.read(), *special(), f"the Jinja template {choice}")
        names = builtin_names()
        if choice not in names:
            raise ConfigError("chat_template", f"{choice!r} is neither a file nor one of "
                              f"llama.cpp's built-in templates ({', '.join(names)})")
        return builtin_template(choice, f"llama.cpp's built-in {choice!r}")
    if own:
        return jinja_template(own, *special(), "the GGUF's tokenizer.chat_template")
    family = FAMILY_TEMPLATES.get(architecture)
    if family is not None:
        return builtin_template(family, f"llama.cpp's built-in {family!r} (the {architecture} "
                                "GGUF carries no template)")
    return None


def no_template(model_path: str) -> EngineError:
    return EngineError(f"{os.path.basename(model_path)} has no chat template (its GGUF has no "
                       "tokenizer.chat_template), so it cannot take a chat turn: give "
                       "--chat-template FILE (Jinja) or a llama.cpp built-in name (gemma, chatml, "
                       "llama3, ...), or write the generation as a plain completion")


def _architecture(model: ctypes.c_void_p) -> str:
    buf = ctypes.create_string_buffer(64)
    n = llama_cpp.llama_model_meta_val_str(model, b"general.architecture", buf, len(buf))
    return buf.value.decode() if n >= 0 else ""


def _special_texts(vocab: ctypes.c_void_p) -> tuple[str, str]:
    return (_token_text(vocab, llama_cpp.llama_vocab_bos(vocab)),
            _token_text(vocab, llama_cpp.llama_vocab_eos(vocab)))


def jinja_template(template: str, bos: str, eos: str, source: str) -> ChatTemplate:
    """A Jinja chat template (HF's conventions: `messages`, `bos_token`, `eos_token`,
    `add_generation_prompt`, `raise_exception`), rendered in jinja2's sandbox."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: PLC0415 - jinja2

    try:
        formatter = Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos)
    except Exception as e:  # jinja2's TemplateSyntaxError: the template file's or GGUF's fault
        raise ConfigError("chat_template", f"{source} is not a valid Jinja template: {e}") from e

    def render(messages: Chat) -> str:
        try:
            text = formatter(messages=as_dicts(messages)).prompt
        except Exception as e:  # the template's raise_exception, or an error inside it
            raise EngineError(f"the chat template refused the turn ({source}): {e}") from e
        return text[len(bos):] if bos and text.startswith(bos) else text

    return ChatTemplate(source, render)


def builtin_template(name: str, source: str) -> ChatTemplate:
    """One of llama.cpp's built-in templates, applied by `llama_chat_apply_template`."""
    def render(messages: Chat) -> str:
        encoded = [(m.role.encode(), m.content.encode("utf-8")) for m in messages]
        array = (llama_cpp.llama_chat_message * len(encoded))()
        for slot, (role, content) in zip(array, encoded, strict=True):
            slot.role, slot.content = role, content
        size = 2 * sum(len(r) + len(c) for r, c in encoded) + 256
        for _ in range(2):  # the first call says how long the text is when it did not fit
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_chat_apply_template(name.encode(), array, len(encoded), True,
                                                    buf, size)
            if n < 0:
                raise EngineError(f"llama.cpp could not apply its {name!r} chat template")
            if n <= size:
                return buf.raw[:n].decode("utf-8")
            size = n
        raise EngineError(f"llama.cpp's {name!r} chat template kept growing")

    return ChatTemplate(source, render)


def _token_text(vocab: ctypes.c_void_p, token: int) -> str:
    if token < 0:
        return ""
    return llama_cpp.llama_vocab_get_text(vocab, token).decode("utf-8", errors="replace")
