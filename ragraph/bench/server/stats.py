"""What a llama.cpp `llama-server` says about its own work, for a bench on `--engine openai`.

Its Prometheus counters (`--metrics`) count the prompt tokens it computed and those it served
from a slot's cache, the tokens it generated and its `llama_decode` calls, whoever sent the
requests: the same measure for ragraph and for the LangGraph app's `openai` client. Between two
runs the bench empties every slot (`POST /slots/{id}?action=erase`, which the server allows only
when started with `--slot-save-path`), so a run never starts on the KV of the run before it.
The server's RAM prompt cache (`--cache-ram`, 8 GiB by default) has no such endpoint: it would
hand the second executor the first one's prompts (the same questions, the same documents), so
the bench refuses a server that keeps one (`check_no_prompt_cache`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import httpx

from ragraph.errors import ConfigError
from ragraph.runtime.llm.http.openai_wire import served_context

# The counters read from /metrics, by their llama-server names.
_COUNTERS = {
    "llamacpp:prompt_tokens_total": "prompt_tokens",
    "llamacpp:prompt_tokens_cached_total": "cached_tokens",
    "llamacpp:tokens_predicted_total": "predicted_tokens",
    "llamacpp:n_decode_total": "decodes",
}
# A cumulative average: times n_decode_total it is the slots busy, summed over decode calls.
_BUSY = "llamacpp:n_busy_slots_per_decode"
SERVER_FLAGS = "--metrics --slot-save-path DIR --cache-ram 0"


def auth(api_key: str | None) -> dict[str, str]:
    """The headers of a server started with --api-key (it guards /metrics and /slots too)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


@dataclass(frozen=True)
class ServerCounters:
    prompt_tokens: int = 0  # computed, cached ones excluded
    cached_tokens: int = 0
    predicted_tokens: int = 0
    decodes: int = 0  # llama_decode calls (prompt chunks and decode steps)
    slot_decodes: float = 0.0  # busy slots summed over those calls

    def minus(self, before: ServerCounters) -> ServerCounters:
        return ServerCounters(
            self.prompt_tokens - before.prompt_tokens, self.cached_tokens - before.cached_tokens,
            self.predicted_tokens - before.predicted_tokens, self.decodes - before.decodes,
            self.slot_decodes - before.slot_decodes)

    @property
    def batch(self) -> float | None:
        """Slots busy in a `llama_decode` call, on average."""
        return self.slot_decodes / self.decodes if self.decodes else None


def parse_metrics(text: str) -> ServerCounters | None:
    """The counters in a /metrics page; None when it is not llama-server's."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in _COUNTERS or name == _BUSY:
            try:
                values[name] = float(value)
            except ValueError:
                continue
    if not all(name in values for name in _COUNTERS):
        return None
    fields = {field: int(values[name]) for name, field in _COUNTERS.items()}
    return ServerCounters(**fields, slot_decodes=values.get(_BUSY, 0.0) * fields["decodes"])


def read_counters(url: str, timeout_s: float = 10.0,
                  api_key: str | None = None) -> ServerCounters | None:
    """The server's counters now; None where it has no llama-server /metrics."""
    try:
        resp = httpx.get(url.rstrip("/") + "/metrics", timeout=timeout_s, headers=auth(api_key))
    except httpx.HTTPError:
        return None
    return parse_metrics(resp.text) if resp.status_code == 200 else None


def props(url: str, timeout_s: float = 10.0, api_key: str | None = None) -> dict:
    """llama-server's /props ({} from a server that has none)."""
    try:
        resp = httpx.get(url.rstrip("/") + "/props", timeout=timeout_s, headers=auth(api_key))
        body = resp.json() if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def slot_count(url: str, timeout_s: float = 10.0, api_key: str | None = None) -> int | None:
    """llama-server's `total_slots`; None where the server is not llama-server."""
    slots = props(url, timeout_s, api_key).get("total_slots")
    return slots if isinstance(slots, int) and slots > 0 else None


def describe(url: str, api_key: str | None = None) -> str:
    """The server in a caption: its build, slots, context per slot and model file."""
    found = props(url, api_key=api_key)
    if not isinstance(found.get("total_slots"), int):
        return f"server at {url}"
    ctx = served_context(found, None)  # read as the engine reads it
    model = str(found.get("model_path") or "?").rsplit("/", 1)[-1]
    return (f"llama-server {found.get('build_info', '?')} at {url}, {found['total_slots']} "
            f"slots of {ctx} tokens, {model}")


def erase_slots(url: str, slots: int, timeout_s: float = 60.0,
                api_key: str | None = None) -> None:
    """Empty every slot's KV, so the next run starts cold. ConfigError where the server
    refuses (started without --slot-save-path)."""
    base = url.rstrip("/")
    for slot in range(slots):
        resp = httpx.post(f"{base}/slots/{slot}", params={"action": "erase"}, timeout=timeout_s,
                          headers=auth(api_key))
        if resp.status_code != 200:
            raise ConfigError("--url", f"llama-server at {url} would not empty slot {slot} "
                              f"(HTTP {resp.status_code}: {resp.text[:200]}); start it with "
                              f"{SERVER_FLAGS} so each bench run starts on empty slots")


def check_no_prompt_cache(url: str, slots: int, timeout_s: float = 120.0,
                          api_key: str | None = None) -> None:
    """ConfigError unless the server is without a RAM prompt cache (`--cache-ram 0`).

    llama-server saves a slot's prompt to that cache when it gives the slot, chosen as the
    least recently used, to a prompt that shares no prefix with it; a prompt then sent to an
    empty slot is loaded from there. So: one probe prompt, then one unrelated prompt per slot
    (the last of them takes the probe's slot), every slot emptied, and the probe again. Its
    prompt tokens served from a cache say whether one survived the erase."""
    nonce = secrets.token_hex(8)
    probe = f"Probe {nonce}: " + "the bench checks for a prompt cache outside the slots. " * 8
    _complete(url, probe, timeout_s, api_key)
    for i in range(slots):
        _complete(url, f"{i} {nonce} " + "an unrelated prompt that shares no prefix. " * 4,
                  timeout_s, api_key)
    erase_slots(url, slots, api_key=api_key)
    cached = _complete(url, probe, timeout_s, api_key)
    erase_slots(url, slots, api_key=api_key)
    if cached > 0:
        raise ConfigError("--url", f"llama-server at {url} keeps a RAM prompt cache that "
                          f"survives emptying its slots ({cached} tokens of a probe came back "
                          "from it): one executor's run would start on the prompts of the run "
                          f"before it. Start it with {SERVER_FLAGS}")


def _complete(url: str, prompt: str, timeout_s: float, api_key: str | None) -> int:
    """One token after `prompt`; its prompt tokens the server served from a cache."""
    resp = httpx.post(url.rstrip("/") + "/v1/completions",
                      json={"prompt": prompt, "max_tokens": 1, "temperature": 0.0},
                      timeout=timeout_s, headers=auth(api_key))
    resp.raise_for_status()
    details = (resp.json().get("usage") or {}).get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens", 0)
    return cached if isinstance(cached, int) else 0
