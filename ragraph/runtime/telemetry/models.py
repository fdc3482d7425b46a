"""The names spans give a run's models (no OpenTelemetry import: read before the extra is)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragraph.runtime.config import RuntimeConfig

PROVIDERS = {"llamacpp": "llama.cpp", "openai": "openai-compatible"}  # else the engine's name


@dataclass(frozen=True)
class Models:
    """What answered the run: the LLM (and its provider), the query embedder."""

    llm: str
    provider: str
    embedder: str | None = None
    simulated: bool = False


def models_of(config: RuntimeConfig, llm, search) -> Models:  # noqa: ANN001 - the engines
    """The run's LLM (its model file or name, else the engine's name) and query embedder."""
    model = config.llm.model or getattr(llm, "model_path", None)
    return Models(llm=Path(model).name if model else llm.name,
                  provider=PROVIDERS.get(config.llm.engine, config.llm.engine),
                  embedder=getattr(search.embedder, "name", None),
                  simulated=bool(llm.simulated))
