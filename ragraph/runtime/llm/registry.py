"""The one place that maps an engine kind to its classes: `create_engine(kind, config)` for a
typed engine config, `engine_for(llm, in_flight)` for a run's LLM part (each config class reads
what it needs from that part alone with `of`).

Engine modules are imported only when their kind is chosen, so that a machine without
llama-cpp-python (or sglang) can still use the other engines.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

from ragraph.errors import ConfigError
from ragraph.runtime.llm.protocol import LLMEngine

if TYPE_CHECKING:
    from ragraph.runtime.llm.settings import LlmConfig


@dataclass(frozen=True)
class EngineKind:
    module: str
    config: str  # the typed config class
    engine: str  # the engine class; "SGLang" picks by the config's mode

    def load(self) -> tuple[type, Any]:
        module = import_module(f"ragraph.runtime.llm.{self.module}")
        return getattr(module, self.config), module


KINDS: dict[str, EngineKind] = {
    "llamacpp": EngineKind("llamacpp.engine", "LlamaCppConfig", "LlamaCppEngine"),
    "openai": EngineKind("http.openai", "OpenAIHttpConfig", "OpenAIHttpEngine"),
    "sglang": EngineKind("http.sglang", "SGLangConfig", "SGLang"),
    "sim": EngineKind("sim.engine", "SimConfig", "SimEngine"),
}
ENGINE_KINDS: tuple[str, ...] = tuple(KINDS)


def create_engine(kind: str, config: Any = None) -> LLMEngine:
    """A new, not yet started engine of `kind` with its typed config (None = defaults; the
    sglang engine needs one: a model path or a server URL)."""
    if kind not in KINDS:
        raise ConfigError("kind", f"unknown engine kind {kind!r}; choose one of "
                          f"{', '.join(ENGINE_KINDS)}")
    spec = KINDS[kind]
    config_cls, module = spec.load()
    if config is None:
        if kind == "sglang":
            raise ConfigError("config", "the sglang engine needs an SGLangConfig (model_path "
                              "or base_url)")
        config = config_cls()
    if not isinstance(config, config_cls):
        raise ConfigError("config", f"the {kind} engine takes a {config_cls.__name__}, got "
                          f"{type(config).__name__}")
    if spec.engine == "SGLang":
        return (module.SGLangEngine if config.mode == "engine" else module.SGLangHttpEngine)(config)
    return getattr(module, spec.engine)(config)


def engine_for(llm: LlmConfig, in_flight: int) -> LLMEngine:
    """The engine the LLM part names, configured from it for `in_flight` requests (the
    scheduler's concurrency)."""
    config_cls, _ = KINDS[llm.engine].load()
    return create_engine(llm.engine, config_cls.of(llm, in_flight))
