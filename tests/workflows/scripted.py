"""An LLM engine that answers from a script, so tests can steer a workflow down each of its
routes: the reply depends on the question in the prompt and on the cue the prompt ends with
(`Needs a lookup:`, `Relevant:`, `Answer:`, ...), as the few-shot prompts of workflows/ are laid out.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from ragraph.runtime.llm.base import EngineBase
from ragraph.runtime.llm.chat import prompt_text
from ragraph.runtime.llm.protocol import GenerationRequest, GenerationResult, TokenEvent
from ragraph.runtime.llm.sim.text import tokenize
from ragraph.runtime.llm.stream import GenerationStream

# The question of the prompt: the last `Question:` line (few-shot examples come before it).
_QUESTION = re.compile(r"^Question: (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Reply:
    text: str
    prob: float = 0.9  # every token's probability (what confidence() reads)


Script = Callable[[str, str, str], Reply]  # (question, cue, prompt) -> reply


def cue_of(prompt: str) -> str:
    """The prompt's last line without its colon ("Answer", "Relevant"); "" for a prompt ending in
    a newline (a chain of thought awaiting its next sentence)."""
    last = prompt.rsplit("\n", 1)[-1]
    return last.rstrip(":").strip()


def question_of(prompt: str) -> str:
    found = _QUESTION.findall(prompt)
    return found[-1] if found else ""


class ScriptedEngine(EngineBase):
    """`LLMEngine` whose output is `script(question, cue, prompt)`, cut at the request's stop strings and
    token budget (one token a word). Replies are delivered on the next loop iteration."""

    simulated = True

    def __init__(self, script: Script) -> None:
        super().__init__("scripted", 32768)
        self.script = script
        self.prompts: list[str] = []

    def tokenize(self, text: str) -> tuple[int, ...]:
        return tokenize(text, 32000)

    def _submit(self, request: GenerationRequest, stream: GenerationStream) -> None:
        # A chat turn is scripted on its contents (the system message, then the user message).
        prompt = request.prompt if request.messages is None else prompt_text(request.messages)
        prompt = prompt or ""
        self.prompts.append(prompt)
        reply = self.script(question_of(prompt), cue_of(prompt), prompt)
        asyncio.get_running_loop().call_soon(self._emit, stream, request, prompt, reply)

    def _emit(self, stream: GenerationStream, request: GenerationRequest, prompt: str,
              reply: Reply) -> None:
        params = request.params
        text = reply.text
        for stop in params.stop:
            text = text.split(stop, 1)[0]
        words = re.findall(r"\s*\S+", text)[: params.max_tokens]
        logprob = math.log(reply.prob)
        for w in words:
            stream.push(TokenEvent(None, w, logprob if params.logprobs else None))
        self._end(stream, GenerationResult(
            rid=request.rid, text="".join(words), token_ids=(), finish_reason="stop",
            prompt_tokens=len(prompt.split()), cached_tokens=0, completion_tokens=len(words),
            logprobs=(logprob,) * len(words) if params.logprobs else None, simulated=True,
        ))
