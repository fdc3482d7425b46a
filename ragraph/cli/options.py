"""Command-line pieces shared by several subcommands."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from ragraph.cli import scale_out
from ragraph.errors import ConfigError
from ragraph.runtime.config import ENGINES, EXECUTORS, RuntimeConfig
from ragraph.runtime.config_file import read_config
from ragraph.runtime.llm.settings import SIM_BATCHING
from ragraph.runtime.scheduler.config import RELEASES


def add_runtime_flags(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """How `run` and `serve` execute workflows: executor, passes, engines, index, core split,
    scale-out (its group returned)."""
    add_config_flag(p)
    p.add_argument("--concurrency", "-c", type=int, help="requests in flight (8)")
    p.add_argument("--executor", choices=EXECUTORS,
                   help="ragraph (wavefront, default), sequential or stage-batched baselines")
    level = p.add_mutually_exclusive_group()
    level.add_argument("--passes", metavar="SPEC", help="pass pipeline (default -O2)")
    level.add_argument("-O", dest="level", choices=("0", "2"), help="-O0 none, -O2 all")
    p.add_argument("--engine", choices=ENGINES, help="LLM engine (llamacpp)")
    p.add_argument("--exact", action="store_true", default=None,
                   help="llama.cpp's serial-exact mode: one generation at a time, each alone in "
                   "an empty KV cache (no batching, no prefix reuse). Every answer is then the "
                   "same whatever the concurrency, executor or passes, and from run and serve "
                   "alike (equal to llama-cpp-python's create_completion); without it the "
                   "batched engine is faster but an answer can change with what it was batched "
                   "with. Slower: generations do not overlap")
    p.add_argument("--model", help="GGUF path (llamacpp) / model path (sglang) / name (openai)")
    p.add_argument("--url", help="server URL for --engine openai or sglang")
    p.add_argument("--index", help="index directory (default: the embedded Wikipedia index)")
    p.add_argument("--nprobe", type=int, help="clusters searched per query (32)")
    p.add_argument("--embedder-url", metavar="URL",
                   help="embed queries with this OpenAI-compatible /v1/embeddings server (vLLM, "
                   "TEI, llama-server --embedding) instead of loading the index's embedder here; "
                   "it must serve the model the index was built with")
    p.add_argument("--otlp", metavar="URL",
                   help="send OpenTelemetry spans (a CHAIN per request, RETRIEVER/EMBEDDING/LLM "
                   "per node) over OTLP/HTTP to this collector, e.g. http://localhost:4318 "
                   "(Jaeger, Phoenix, an OpenTelemetry Collector); needs the otel extra")
    add_model_flags(p)
    add_thread_flags(p)
    add_gpu_flags(p)
    return scale_out.add_arguments(p)


def add_model_flags(p: argparse.ArgumentParser) -> None:
    """The model's context and chat template, and an OpenAI-compatible server's API."""
    p.add_argument("--ctx", type=int, metavar="N",
                   help="context length: llama.cpp's per-sequence tokens (2048); for --engine "
                   "openai, the server's (default: what it states, llama-server in /props and "
                   "vLLM in /v1/models; this flag overrides it)")
    p.add_argument("--chat-template", metavar="NAME|FILE",
                   help="llama.cpp: how chat turns (`system =`/`user =` generations) are "
                   "rendered: a Jinja file, or a llama.cpp built-in name (gemma, chatml, llama3, "
                   "...). Default: the GGUF's own tokenizer.chat_template (llama.cpp's gemma "
                   "for the packaged Gemma-3-270M, whose GGUF has none)")
    p.add_argument("--openai-endpoint", choices=("completions", "chat"),
                   help="--engine openai: send completions to /v1/completions (default) or, as "
                   "one user message, to /v1/chat/completions for servers that offer only chat; "
                   "chat turns always go to /v1/chat/completions")
    p.add_argument("--api-key-env", metavar="VAR",
                   help="--engine openai: the environment variable that holds the upstream "
                   "server's API key (sent as a Bearer token; the key is never taken on the "
                   "command line nor logged)")


def add_thread_flags(p: argparse.ArgumentParser) -> None:
    """The core split between the LLM engine and search (`threads.default_split`)."""
    p.add_argument("--gen-threads", type=int,
                   help="llama.cpp threads (default: every core for llama.cpp, 1 otherwise)")
    p.add_argument("--search-threads", type=int,
                   help="faiss/embedder threads (default: 1 per 8 cores beside llama.cpp, every "
                   "core up to 8 beside a GPU engine)")


def add_config_flag(p: argparse.ArgumentParser) -> None:
    """`--config FILE.toml`: the run's configuration from a file, the flags given over it."""
    p.add_argument("--config", type=Path, metavar="FILE.toml",
                   help="read the run's configuration from this TOML file (one table per part: "
                   "[llm], [search], [scheduler], [scale]; docs/guides/config.md); flags given "
                   "beside it override its values")


def runtime_config(args: argparse.Namespace) -> RuntimeConfig:
    """The validated run configuration: the --config file's, with the flags given over it."""
    tree = read_config(args.config) if args.config is not None else {}
    config = RuntimeConfig.of(tree, **given_flags(args))
    scale_out.check(args, config.scale)
    return config


def given_flags(args: argparse.Namespace) -> dict[str, object]:
    """The knobs of `add_runtime_flags`' flags that were given (a flag left out is None)."""
    passes = args.passes or (f"-O{args.level}" if args.level else None)
    flags = {
        "engine": args.engine, "model": args.model, "url": args.url, "index": args.index,
        "embedder_url": args.embedder_url, "executor": args.executor, "passes": passes,
        "concurrency": args.concurrency, "nprobe": args.nprobe, "gen_threads": args.gen_threads,
        "search_threads": args.search_threads, "hot_cache": args.hot_cache,
        "profile": args.profile, "sim_batching": args.sim_batching,
        "sim_budget": args.sim_budget, "release": args.release, "exact": args.exact, "ctx": args.ctx,
        "chat_template": args.chat_template, "openai_endpoint": args.openai_endpoint,
        "api_key_env": args.api_key_env, "otlp": args.otlp, **scale_out.fields(args),
    }
    return {name: value for name, value in flags.items() if value is not None}


def add_gpu_flags(p: argparse.ArgumentParser) -> None:
    """`--hot-cache/--no-hot-cache` and `--profile`, as `run` and `bench` take them."""
    p.add_argument("--hot-cache", action=argparse.BooleanOptionalAction, default=None,
                   help="keep the hottest 20%% of clusters on the GPU and prefetch into it "
                   "(default: off; measured not faster end to end yet, docs/benchmarks/gpu.md)")
    p.add_argument("--profile", metavar="FILE",
                   help="--engine sim: step times from this GPU profile (`ragraph calibrate`); "
                   "default: the shipped H100 / Llama-3.1-8B profile; h200-llama-3.1-8b: the "
                   "shipped H200 one; 'roofline': the datasheet model alone")
    p.add_argument("--sim-batching", choices=SIM_BATCHING,
                   help="--engine sim: whose step policy the simulated GPU follows (default "
                   "vllm: vLLM V1's token budget, decode first; sglang: a prefill batch and a "
                   "decode batch alternate; sglang-mixed: SGLang's --enable-mixed-chunk); "
                   "docs/guides/engines.md#how-each-engine-batches")
    p.add_argument("--release", choices=RELEASES,
                   help="when the wavefront hands prompts to the LLM engine: step (default: a "
                   "search step's together), retrieval (each as its retrieval finishes), or auto "
                   "(retrieval where the engine batches on its own, is the bound and the search "
                   "thread has time to spare, else step; not measured ahead yet); docs/guides/engines.md#how-each-engine-batches")
    p.add_argument("--sim-budget", type=int, metavar="TOKENS",
                   help="--engine sim: tokens one step computes at most (default 8192, vLLM's "
                   "max_num_batched_tokens and SGLang's chunked_prefill_size on H100-class GPUs)")


def numbers(text: str | None, flag: str, cast: Callable[[str], object]) -> tuple | None:
    """`1,2,3` as a tuple of `cast` values; None stays None (the flag was not given)."""
    if text is None:
        return None
    try:
        return tuple(cast(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise ConfigError(flag, f"expected comma-separated numbers, got {text!r}") from err
