"""The clients of the chaos test: every endpoint, streaming or not, some leaving mid-stream, some
sending what no client should. Each shot reports what it got back, whole, so the test can tell
an answer from an error and a finished stream from a cut one."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass

import httpx

KINDS = ("wait", "runs", "chat", "chat-stream", "text", "text-stream", "drop", "bad")
WEIGHTS = (18, 12, 14, 10, 8, 8, 20, 10)  # 20% leave mid-stream
MAX_BODY = 64 * 1024
_CHAT = {"model": "hyde", "messages": [{"role": "user", "content": "x"}]}
# (body, content type, status): every mistake a client can make gets its own 4xx.
BAD = (
    (b'{"model": "hyde", ', "application/json", 400),
    (json.dumps({**_CHAT, "model": "gpt-9"}).encode(), "application/json", 404),
    (json.dumps({**_CHAT, "messages": [{"role": "assistant", "content": "x"}]}).encode(),
     "application/json", 400),
    (json.dumps({"model": "hyde", "prompt": "x" * MAX_BODY}).encode(), "application/json", 413),
    (b'{"model": "hyde", "messages": [{"role": "user", "content": "\\ud800"}]}',
     "application/json", 400),
    (b"[" * 1000 + b"]" * 1000, "application/json", 400),
    (json.dumps({**_CHAT, "max_tokens": -5}).encode(), "application/json", 400),
    (json.dumps({**_CHAT, "temperature": math.nan}).encode(), "application/json", 400),
    (json.dumps({**_CHAT, "n": True}).encode(), "application/json", 400),
    (json.dumps(_CHAT).encode(), "text/plain", 415),
)


@dataclass(frozen=True)
class Shot:
    n: int
    kind: str
    workflow: str
    question: str

    @property
    def bad(self) -> tuple[bytes, str, int]:
        return BAD[self.n % len(BAD)]


@dataclass(frozen=True)
class Result:
    shot: Shot
    status: int
    answer: str | None = None
    error: str | None = None  # the error the response or the stream ended with
    ended: bool = True  # a stream ended with its last event (end, error or [DONE])
    sent: float = 0.0
    done: float = 0.0


def plan(count: int, workflows: tuple[str, ...], questions: list[str], seed: int = 11
         ) -> list[Shot]:
    rng = random.Random(seed)
    return [Shot(i, rng.choices(KINDS, WEIGHTS)[0], workflows[i % len(workflows)],
                 rng.choice(questions)) for i in range(count)]


async def fire(client: httpx.AsyncClient, shot: Shot) -> Result:
    """What the server answered; a connection the server broke is a cut stream (status 0)."""
    try:
        return await _fire(client, shot)
    except httpx.TransportError as err:
        return Result(shot, 0, error=f"{type(err).__name__}: {err}", ended=False)


async def _fire(client: httpx.AsyncClient, shot: Shot) -> Result:
    if shot.kind == "bad":
        body, ctype, _ = shot.bad
        r = await client.post("/v1/chat/completions", content=body,
                              headers={"content-type": ctype})
        return Result(shot, r.status_code, error=_message(r))
    if shot.kind == "wait":
        r = await client.post("/runs/wait", json={"workflow": shot.workflow,
                                                  "input": {"question": shot.question}})
        return Result(shot, r.status_code, r.json().get("answer"), _message(r))
    if shot.kind == "runs":
        return await _runs_stream(client, shot)
    chat = shot.kind.startswith(("chat", "drop"))
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = {"model": shot.workflow, **({"messages": [{"role": "user", "content": shot.question}]}
                                       if chat else {"prompt": shot.question})}
    if shot.kind in ("chat", "text"):
        r = await client.post(path, json=body)
        if r.status_code != 200:
            return Result(shot, r.status_code, error=_message(r))
        choice = r.json()["choices"][0]
        return Result(shot, 200, choice["message"]["content"] if chat else choice["text"])
    return await _openai_stream(client, shot, path, {**body, "stream": True}, chat)


async def _runs_stream(client: httpx.AsyncClient, shot: Shot) -> Result:
    body = {"workflow": shot.workflow, "input": {"question": shot.question},
            "stream_mode": ["updates", "messages"]}
    async with client.stream("POST", "/runs/stream", json=body) as r:
        if r.status_code != 200:
            await r.aread()
            return Result(shot, r.status_code, error=_message(r))
        event = None
        async for line in r.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event in ("end", "error"):
                data = json.loads(line[5:])
                if event == "end":
                    return Result(shot, 200, data.get("answer"))
                return Result(shot, 200, error=data.get("message") or str(data))
    return Result(shot, 200, ended=False)


async def _openai_stream(client: httpx.AsyncClient, shot: Shot, path: str, body: dict,
                         chat: bool) -> Result:
    text: list[str] = []
    async with client.stream("POST", path, json=body) as r:
        if r.status_code != 200:
            await r.aread()
            return Result(shot, r.status_code, error=_message(r))
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                return Result(shot, 200, "".join(text))
            obj = json.loads(line[6:])
            if "error" in obj:
                return Result(shot, 200, error=str(obj["error"].get("message")))
            for choice in obj.get("choices") or ():
                piece = choice["delta"].get("content") if chat else choice.get("text")
                if piece:
                    text.append(piece)
                    if shot.kind == "drop":
                        return Result(shot, 200)  # leaves mid-stream
    return Result(shot, 200, ended=False)


def _message(r: httpx.Response) -> str | None:
    if r.status_code == 200:
        return None
    try:
        return r.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return r.text[:200]
