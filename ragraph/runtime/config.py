"""The run configuration: built and validated once at the edge (CLI, API, bench), passed down."""

from __future__ import annotations

from dataclasses import dataclass

from ragraph.errors import ConfigError
from ragraph.runtime.devices import GpuPaths, cuda_available, gpu_paths
from ragraph.runtime.threads import CoreSplit, default_split, usable_cores

EXECUTORS = ("ragraph", "sequential", "stage-batched", "langgraph")
ENGINES = ("llamacpp", "sim", "openai", "sglang")


@dataclass(frozen=True)
class RuntimeConfig:
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
    index: str | None = None  # index directory; None = the embedded default Wikipedia index
    # Queries embedded by this OpenAI-compatible /v1/embeddings server instead of the index's
    # model loaded here; it must serve the model the index was built with.
    embedder_url: str | None = None
    executor: str = "ragraph"
    passes: str = "-O2"
    concurrency: int = 8
    nprobe: int = 32
    # The core split: llama.cpp threads vs faiss/embedding threads; None = this machine's default
    # for the engine (`threads.default_split`), filled in at construction.
    gen_threads: int | None = None
    search_threads: int | None = None
    tau: float = 0.6
    budget_ms: float | None = None
    # The accelerator tier (hot-cluster cache + TeleRAG prefetch); None: on exactly when a CUDA
    # device is present (devices.py; on a CPU-only machine its "accelerator" is the same CPU).
    hot_cache: bool | None = None
    hot_fraction: float = 0.2  # HedraRAG: the top 20% of clusters carried 69% of the work
    link_gb_per_s: float = 25.0  # host-to-accelerator bandwidth (PCIe 4.0 x16) for prefetch
    # The simulated engine's timing: None = the shipped H100 / Llama-3.1-8B profile, "roofline"
    # = the datasheet model alone, else a profile file (llm/profiled.py).
    profile: str | None = None
    # llama.cpp: keep finished sequences' KV to reuse shared prompt prefixes (documents, the
    # instruction, an earlier round's prompt); off only to measure what it is worth.
    prefix_reuse: bool = True
    # llama.cpp's serial-exact mode: one sequence at a time, each alone in an empty KV cache.
    # Batching changes how ggml's kernels cut a sequence's rows, which can flip greedy tokens at
    # near-ties (llm/llamacpp.py); alone, every answer equals `Llama.create_completion`'s
    # whatever the concurrency, executor or passes, and `run` and `serve` agree.
    exact: bool = False
    # Scale-out: the Ray cluster whose actors hold the index's lists (`shards` of them, the
    # `replicate` share of the largest lists on two), and LLM server replicas behind one router.
    ray: str | None = None
    shards: int = 2
    replicate: float = 0.1
    shard_cpus: float = 1.0
    replicas: tuple[str, ...] = ()
    # An OTLP/HTTP collector (Jaeger, Phoenix, an OpenTelemetry Collector) that receives a span
    # per request and per node (runtime/otel); None: no spans are built at all.
    otlp: str | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigError("engine", f"must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        split = default_split(self.engine)
        if self.gen_threads is None:
            object.__setattr__(self, "gen_threads", split.gen)
        if self.search_threads is None:
            object.__setattr__(self, "search_threads", split.search)
        if self.executor not in EXECUTORS:
            raise ConfigError("executor",
                              f"must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        for name in ("concurrency", "nprobe", "gen_threads", "search_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(name, f"must be a positive integer, got {value!r}")
        if not 0 < self.tau <= 1:
            raise ConfigError("tau", f"must be in (0, 1], got {self.tau}")
        if not 0 < self.hot_fraction <= 1:
            raise ConfigError("hot_fraction", f"must be in (0, 1], got {self.hot_fraction}")
        if self.link_gb_per_s <= 0:
            raise ConfigError("link_gb_per_s", f"must be positive, got {self.link_gb_per_s}")
        if self.budget_ms is not None and self.budget_ms <= 0:
            raise ConfigError("budget_ms", f"must be positive, got {self.budget_ms}")
        self._check_scale_out()
        if self.embedder_url is not None and not self.embedder_url.startswith(
                ("http://", "https://")):
            raise ConfigError("embedder_url", f"must be an http(s):// URL, got {self.embedder_url!r}")
        if self.otlp is not None and not self.otlp.startswith(("http://", "https://")):
            raise ConfigError("otlp", f"must be an OTLP/HTTP collector's http(s):// URL, got "
                              f"{self.otlp!r}")
        if self.engine in ("openai",) and not (self.url or self.replicas):
            raise ConfigError("url", f"the {self.engine} engine needs a server URL")
        self._check_llm_options()
        if self.profile is not None and self.engine != "sim":
            raise ConfigError("profile", f"only the sim engine uses a GPU profile, not {self.engine}")
        if self.exact and self.engine != "llamacpp":
            raise ConfigError("exact", "the serial-exact engine is llama.cpp's (--engine "
                              f"llamacpp), not {self.engine}; the sim engine is exact already")
        if self.engine == "sglang" and not (self.url or self.model):
            raise ConfigError("model", "the sglang engine needs --model (in-process) or --url")

    def _check_llm_options(self) -> None:
        if self.ctx is not None and (isinstance(self.ctx, bool) or not isinstance(self.ctx, int)
                                     or self.ctx < 16):
            raise ConfigError("ctx", f"must be an integer >= 16, got {self.ctx!r}")
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

    def _check_scale_out(self) -> None:
        if isinstance(self.shards, bool) or not isinstance(self.shards, int) or self.shards < 1:
            raise ConfigError("shards", f"must be a positive integer, got {self.shards!r}")
        if not 0 <= self.replicate <= 1:
            raise ConfigError("replicate", f"must be in [0, 1], got {self.replicate}")
        if self.ray is not None and self.hot_cache:
            raise ConfigError("hot_cache", "the accelerator tier is single-node; not with --ray")
        if self.ray is not None and self.executor == "langgraph":
            raise ConfigError("executor", "the LangGraph app calls faiss directly; not with --ray")
        if self.replicas and self.engine != "openai":
            raise ConfigError("replicas", "replicas are OpenAI-compatible servers: --engine openai")
        if self.replicas and self.url:
            raise ConfigError("replicas", "give the servers either as --url or as --replicas")
        if any(not u.startswith(("http://", "https://")) for u in self.replicas):
            raise ConfigError("replicas", f"every replica is an http(s):// URL, got {self.replicas}")

    @property
    def simulated(self) -> bool:
        return self.engine == "sim"

    @property
    def gpu(self) -> GpuPaths:
        """Which retrieval paths run on the GPU on this machine, and why."""
        return gpu_paths(self.hot_cache, cuda_available())

    @property
    def split(self) -> CoreSplit:
        return CoreSplit(gen=self.gen_threads, search=self.search_threads)  # type: ignore[arg-type]

    def describe_threads(self) -> str:
        return self.split.describe(usable_cores())
