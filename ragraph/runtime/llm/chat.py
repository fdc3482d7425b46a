"""Chat messages as engines take them, and the one prompt value the runtime passes around.

A generation's prompt is either completion text (`str`) or a chat turn (a tuple of
`ChatMessage`s): the engine renders a turn with the model's own template (llama.cpp: the GGUF's;
an HTTP server: its own, behind `/v1/chat/completions`; the simulated engine: a stand-in). The
scheduler never renders a template: it compares prompts for equality (speculation's commit point)
and estimates shared prefixes on `prompt_text`, the turn's contents in the order every template
keeps them (`ragraph.ir.chat`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ragraph.errors import ConfigError
from ragraph.ir.chat import SEPARATOR

Role = Literal["system", "user", "assistant"]
ROLES: tuple[str, ...] = ("system", "user", "assistant")


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ConfigError("role", f"must be one of {', '.join(ROLES)}, got {self.role!r}")
        if not isinstance(self.content, str):
            raise ConfigError("content", f"must be a string, got {type(self.content).__name__}")


Chat = tuple[ChatMessage, ...]
Prompt = str | Chat


def chat_turn(user: str, system: str | None = None) -> Chat:
    """One turn: the system message (when there is one), then the user message."""
    head = () if system is None else (ChatMessage("system", system),)
    return (*head, ChatMessage("user", user))


def prompt_text(prompt: Prompt) -> str:
    """The prompt as one text: completion text as it is, a chat's contents joined in order."""
    if isinstance(prompt, str):
        return prompt
    return SEPARATOR.join(m.content for m in prompt)


# Says what the simulated engine does with a chat turn (it has no model, so no template).
STAND_IN = "simulated stand-in (<|role|> markers; no model, no real template)"


def stand_in(messages: Chat) -> str:
    """The simulated engine's rendering of a chat turn: deterministic, with markers that no
    completion prompt of the workflows contains, so a chat turn and a completion of the same
    text are different prompts to it, as they are to a real model."""
    return "".join(f"<|{m.role}|>\n{m.content}\n" for m in messages) + "<|assistant|>\n"


def as_dicts(messages: Chat) -> list[dict[str, str]]:
    """The OpenAI wire form (and what Jinja chat templates iterate over)."""
    return [{"role": m.role, "content": m.content} for m in messages]
