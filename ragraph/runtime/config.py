"""The run configuration: one tree of frozen parts, built and validated once at the edge (the
CLI, the bench, `serve`, the Python API) and passed down, each component given its own part:
the engines `llm`, the index `search`, the executor `scheduler`, the Ray shards `scale`.

Every knob has one name everywhere: its flag (`--gen-threads`), its Python keyword
(`gen_threads=`), its key in its part's table of a config file (`[llm] gen_threads`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ragraph.errors import ConfigError
from ragraph.runtime.checks import hints, http_url
from ragraph.runtime.devices import GpuPaths
from ragraph.runtime.distributed.options import ScaleConfig
from ragraph.runtime.llm.settings import ENGINES, LlmConfig
from ragraph.runtime.retrieval.settings import SearchConfig
from ragraph.runtime.scheduler.config import EXECUTORS, SchedulerConfig
from ragraph.runtime.threads import CoreSplit, default_split, usable_cores

__all__ = ["ENGINES", "EXECUTORS", "PARTS", "LlmConfig", "RuntimeConfig", "ScaleConfig",
           "SchedulerConfig", "SearchConfig", "TOP_LEVEL", "knobs", "part_of", "tree_with"]


@dataclass(frozen=True)
class RuntimeConfig:
    llm: LlmConfig = field(default_factory=LlmConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    scale: ScaleConfig = field(default_factory=ScaleConfig)
    # An OTLP/HTTP collector (Jaeger, Phoenix, an OpenTelemetry Collector) that receives a span
    # per request and per node (runtime/otel); None: no spans are built at all.
    otlp: str | None = None

    def __post_init__(self) -> None:
        if self.search.search_threads is None:
            threads = default_split(self.llm.engine).search
            object.__setattr__(self, "search", replace(self.search, search_threads=threads))
        http_url("otlp", self.otlp, "an OTLP/HTTP collector's http(s):// URL")
        if self.scale.ray is not None and self.search.hot_cache:
            raise ConfigError("hot_cache", "the accelerator tier is single-node; not with --ray")
        if self.scale.ray is not None and self.scheduler.executor == "langgraph":
            raise ConfigError("executor", "the LangGraph app calls faiss directly; not with --ray")

    @classmethod
    def of(cls, tree: Mapping[str, Any] | None = None, **flat: Any) -> RuntimeConfig:
        """The configuration of `tree` (a config file's tables: {"llm": {...}, ...}) with the
        `flat` knobs (`engine="sim"`, `concurrency=16`: the flags' names) over it."""
        tree = tree_with(tree or {}, flat)
        parts = {part: PARTS[part](**tree.pop(part)) for part in PARTS if part in tree}
        return cls(**parts, **tree)

    def with_knobs(self, **flat: Any) -> RuntimeConfig:
        """This configuration with the `flat` knobs changed, each in its part."""
        parts: dict[str, dict[str, Any]] = {}
        for name, value in flat.items():
            parts.setdefault(part_of(name) or "", {})[name] = value
        top = parts.pop("", {})
        return replace(self, **top, **{part: replace(getattr(self, part), **values)
                                       for part, values in parts.items()})

    @property
    def simulated(self) -> bool:
        return self.llm.simulated

    @property
    def gpu(self) -> GpuPaths:
        return self.search.gpu

    @property
    def split(self) -> CoreSplit:
        return CoreSplit(gen=self.llm.gen_threads,  # type: ignore[arg-type]
                         search=self.search.search_threads)  # type: ignore[arg-type]

    def describe_threads(self) -> str:
        return self.split.describe(usable_cores())


# The tree's parts by table name, and the knobs outside any part.
PARTS: dict[str, type] = {"llm": LlmConfig, "search": SearchConfig,
                          "scheduler": SchedulerConfig, "scale": ScaleConfig}
TOP_LEVEL: tuple[str, ...] = ("otlp",)
_PART_OF = {f.name: part for part, cls in PARTS.items() for f in fields(cls)}


def part_of(name: str) -> str | None:
    """The part holding knob `name` (None: a top-level knob); an unknown name is an error."""
    if name in TOP_LEVEL:
        return None
    if name not in _PART_OF:
        raise ConfigError(name, "not a runtime option")
    return _PART_OF[name]


def knob_type(name: str) -> Any:
    """The type of knob `name`'s values (its field's annotation)."""
    part = part_of(name)
    return hints(RuntimeConfig if part is None else PARTS[part])[name]


def tree_with(tree: Mapping[str, Any], flat: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `tree` (a config file's tables) with the `flat` knobs set, each in its table
    (the top-level ones at the top); an unknown knob is an error naming it."""
    out = {part: dict(values) if isinstance(values, Mapping) else values
           for part, values in tree.items()}
    for name, value in flat.items():
        part = part_of(name)
        if part is None:
            out[name] = value
        else:
            out.setdefault(part, {})[name] = value
    return out


def knobs() -> list[str]:
    """Every knob's name, part by part."""
    return [*_PART_OF, *TOP_LEVEL]
