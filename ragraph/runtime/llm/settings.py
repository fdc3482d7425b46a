"""The run's LLM part: which engine, which model, and how it is reached. Engines are built
from this part alone (`registry.engine_for`); it is the `[llm]` table of a config file."""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.errors import ConfigError
from ragraph.runtime.checks import MAX_CONTEXT, MAX_THREADS, positive_int
from ragraph.runtime.llm.sim.batching import Batching
from ragraph.runtime.threads import default_split

ENGINES = ("llamacpp", "sim", "openai", "sglang")
# The simulated engine's step policies (sim/batching.py): vLLM V1's, SGLang's with its mixed
# chunk off (its default) or on.
SIM_BATCHING = ("vllm", "sglang", "sglang-mixed")


@dataclass(frozen=True)
class LlmConfig:
    engine: str = "llamacpp"
    model: str | None = None  # GGUF path (llamacpp), model path (sglang), model name (openai)
    url: str | None = None  # server base URL (openai, sglang --mode http)
    # The context length: llama.cpp's per-sequence KV cells (None: 2,048); an OpenAI-compatible
    # server's (None: what it states in /props or /v1/models, if anything).
    ctx: int | None = None
    # llama.cpp: a Jinja template file or a llama.cpp built-in template name for chat turns
    # (None: the GGUF's own tokenizer.chat_template).
    chat_template: str | None = None
    # openai: where a completion goes ("completions" or "chat"; a chat turn always goes to
    # /v1/chat/completions), and the environment variable holding the upstream key (the name
    # only: the key itself never appears on a command line, in a config or in a log).
    openai_endpoint: str = "completions"
    api_key_env: str | None = None
    # llama.cpp's threads; None = this machine's default for the engine (`threads.default_split`),
    # filled in at construction.
    gen_threads: int | None = None
    # The simulated engine's timing: None = the shipped H100 / Llama-3.1-8B profile, "roofline"
    # = the datasheet model alone, else a shipped profile's name or a profile file (llm/profiled.py).
    profile: str | None = None
    # The simulated engine's step policy (one of SIM_BATCHING) and its token budget per step
    # (vLLM's max_num_batched_tokens, SGLang's chunked_prefill_size: 8,192 on H100-class GPUs).
    sim_batching: str = "vllm"
    sim_budget: int = 8192
    # llama.cpp: keep finished sequences' KV to reuse shared prompt prefixes (documents, the
    # instruction, an earlier round's prompt); off only to measure what it is worth.
    prefix_reuse: bool = True
    # llama.cpp's serial-exact mode: one sequence at a time, each alone in an empty KV cache.
    # Batching changes how ggml's kernels cut a sequence's rows, which can flip greedy tokens at
    # near-ties (llm/llamacpp.py); alone, every answer equals `Llama.create_completion`'s
    # whatever the concurrency, executor or passes, and `run` and `serve` agree.
    exact: bool = False
    # LLM server replicas behind one router (distributed/replicas.py).
    replicas: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigError("engine", f"must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if isinstance(self.replicas, list):
            object.__setattr__(self, "replicas", tuple(self.replicas))
        if self.gen_threads is None:
            object.__setattr__(self, "gen_threads", default_split(self.engine).gen)
        positive_int("gen_threads", self.gen_threads, MAX_THREADS)
        self._check_replicas()
        if self.engine in ("openai",) and not (self.url or self.replicas):
            raise ConfigError("url", f"the {self.engine} engine needs a server URL")
        self._check_model_options()
        if self.profile is not None and self.engine != "sim":
            raise ConfigError("profile", f"only the sim engine uses a GPU profile, not {self.engine}")
        if self.sim_batching not in SIM_BATCHING:
            raise ConfigError("sim_batching", f"must be one of {', '.join(SIM_BATCHING)}, got "
                              f"{self.sim_batching!r}")
        positive_int("sim_budget", self.sim_budget, MAX_CONTEXT)  # tokens a step
        if self.exact and self.engine != "llamacpp":
            raise ConfigError("exact", "the serial-exact engine is llama.cpp's (--engine "
                              f"llamacpp), not {self.engine}; the sim engine is exact already")
        if self.engine == "sglang" and not (self.url or self.model):
            raise ConfigError("model", "the sglang engine needs --model (in-process) or --url")

    @property
    def batch_invariant(self) -> bool:
        """Whether the engine these settings build promises each answer whatever it is batched
        with (its `batch_invariant`): the simulated engine, and llama.cpp's serial-exact mode,
        asked of the llama.cpp config these settings build, as the engine asks it."""
        if self.engine != "llamacpp":
            return self.engine == "sim"
        # Here, not at the top: the llama.cpp package sets libgomp's spin policy on import,
        # which only a run on that engine should get.
        from ragraph.runtime.llm.llamacpp.config import LlamaCppConfig  # noqa: PLC0415

        return LlamaCppConfig.of(self, in_flight=1).batch_invariant  # any in_flight: the same

    def batching(self) -> Batching:
        """The simulated engine's step policy, as `sim_batching` and `sim_budget` name it."""
        policy, _, mixed = self.sim_batching.partition("-")
        return Batching(policy=policy, token_budget=self.sim_budget, mixed_chunk=bool(mixed))

    def _check_model_options(self) -> None:
        if self.ctx is not None and (isinstance(self.ctx, bool) or not isinstance(self.ctx, int)
                                     or not 16 <= self.ctx <= MAX_CONTEXT):
            raise ConfigError("ctx", f"must be an integer in 16..{MAX_CONTEXT:,}, got {self.ctx!r}")
        if self.ctx is not None and self.engine not in ("llamacpp", "openai"):
            raise ConfigError("ctx", f"sets llama.cpp's or an OpenAI-compatible server's "
                              f"context, not {self.engine}'s")
        if self.chat_template is not None and self.engine != "llamacpp":
            raise ConfigError("chat_template", "is llama.cpp's (--engine llamacpp); an HTTP "
                              "server applies its own template")
        if self.openai_endpoint not in ("completions", "chat"):
            raise ConfigError("openai_endpoint", f"must be completions or chat, got "
                              f"{self.openai_endpoint!r}")
        if self.api_key_env is not None and self.engine != "openai":
            raise ConfigError("api_key_env", f"is for --engine openai, not {self.engine}")
        if self.api_key_env is not None and not self.api_key_env.isidentifier():
            raise ConfigError("api_key_env", "names an environment variable (letters, digits, "
                              f"_), got {self.api_key_env!r}")

    def _check_replicas(self) -> None:
        if self.replicas and self.engine != "openai":
            raise ConfigError("replicas", "replicas are OpenAI-compatible servers: --engine openai")
        if self.replicas and self.url:
            raise ConfigError("replicas", "give the servers either as --url or as --replicas")
        if any(not u.startswith(("http://", "https://")) for u in self.replicas):
            raise ConfigError("replicas", f"every replica is an http(s):// URL, got {self.replicas}")

    @property
    def simulated(self) -> bool:
        return self.engine == "sim"
