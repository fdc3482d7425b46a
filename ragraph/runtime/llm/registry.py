"""`create_engine(kind, config)`: the one place that maps an engine kind to its class.

Engine modules are imported only when their kind is chosen, so that a machine without
llama-cpp-python (or sglang) can still use the other engines.
"""

from __future__ import annotations

from typing import Any

from ragraph.errors import ConfigError
from ragraph.runtime.llm.protocol import LLMEngine

ENGINE_KINDS: tuple[str, ...] = ("llamacpp", "openai", "sglang", "sim")


def create_engine(kind: str, config: Any = None) -> LLMEngine:
    """A new, not yet started engine of `kind` with its typed config (None = defaults).

    kinds: "llamacpp" (LlamaCppConfig), "openai" (OpenAIHttpConfig), "sglang" (SGLangConfig;
    mode "engine" in-process or "http" native server), "sim" (SimConfig).
    """
    if kind == "llamacpp":
        from ragraph.runtime.llm.llamacpp import LlamaCppConfig, LlamaCppEngine  # noqa: PLC0415

        return LlamaCppEngine(_typed(config, LlamaCppConfig, kind))
    if kind == "openai":
        from ragraph.runtime.llm.openai_http import OpenAIHttpConfig, OpenAIHttpEngine  # noqa: PLC0415

        return OpenAIHttpEngine(_typed(config, OpenAIHttpConfig, kind))
    if kind == "sglang":
        from ragraph.runtime.llm.sglang import SGLangConfig, SGLangEngine, SGLangHttpEngine  # noqa: PLC0415

        if config is None:
            raise ConfigError("config", "the sglang engine needs an SGLangConfig (model_path or base_url)")
        cfg = _typed(config, SGLangConfig, kind)
        return SGLangEngine(cfg) if cfg.mode == "engine" else SGLangHttpEngine(cfg)
    if kind == "sim":
        from ragraph.runtime.llm.sim import SimConfig, SimEngine  # noqa: PLC0415

        return SimEngine(_typed(config, SimConfig, kind))
    raise ConfigError("kind", f"unknown engine kind {kind!r}; choose one of {', '.join(ENGINE_KINDS)}")


def _typed(config: Any, cls: type, kind: str) -> Any:
    if config is None:
        return cls()
    if not isinstance(config, cls):
        raise ConfigError("config", f"the {kind} engine takes a {cls.__name__}, got {type(config).__name__}")
    return config
