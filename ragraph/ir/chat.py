"""A generation written as a chat turn: an optional system message and the user message.

The engine renders the turn with the model's own chat template (llama.cpp: the GGUF's
`tokenizer.chat_template`; an HTTP server: its own, through `/v1/chat/completions`). What ragraph
itself computes about a prompt (the prefix-layout of [system][documents][question], shared-prefix
estimates, the reference walker's fake output) it computes on one flat text, [system][SEPARATOR]
[user]. Every chat template keeps the two contents in that order and only adds its own markers
around them (Gemma's renders exactly this text between `<start_of_turn>user` and `<end_of_turn>`),
so a prefix that is static, or shared by two turns, in the flat text is so in the rendered turn.
"""

from __future__ import annotations

from ragraph.ir.template import Template

SEPARATOR = "\n\n"


def flat_prompt(prompt: Template, system: Template | None) -> Template:
    """The turn's system and user templates as one template (the user template alone without a
    system message). The separator has no braces, so the joined text parses to the holes of both."""
    if system is None:
        return prompt
    return Template.parse(system.text + SEPARATOR + prompt.text)
