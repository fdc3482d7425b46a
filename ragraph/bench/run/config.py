"""The bench's typed settings, validated once at the edge, and the --quick preset."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ragraph.bench.data.traffic import UNIFORM, Traffic
from ragraph.bench.run.cells import Variant, plain
from ragraph.bench.server.alone import LABEL as SERVER_ALONE
from ragraph.errors import ConfigError
from ragraph.runtime.checks import MAX_CONCURRENCY, MAX_NPROBE, positive_int
from ragraph.runtime.config import EXECUTORS, RuntimeConfig
from ragraph.runtime.config_file import read_config

BENCH_ENGINES = ("sim", "llamacpp", "openai")
# Listed first is the one the ratios are about; the baselines follow.
EXECUTOR_ORDER = ("ragraph", "sequential", "stage-batched")
# On a real engine (embedded, or a server) the baseline users compare with is a real LangGraph
# app (issues 14 and 28).
LLAMACPP_EXECUTORS = ("ragraph", "langgraph")
LLAMACPP_WORKFLOWS = ("hyde", "irg", "oneshot", "multistep")
NO_REUSE = "ragraph, no prefix store"
# The run's knobs a bench takes as they are (`BenchConfig.run`), from flags or a --config file;
# it sweeps concurrency and nprobe itself (`concurrencies`, `nprobes`), gives each run its
# executor and builds its own index.
RUN_KNOBS = ("engine", "model", "url", "ctx", "chat_template", "openai_endpoint", "api_key_env",
             "gen_threads", "search_threads", "passes", "hot_cache", "profile", "sim_batching",
             "sim_budget", "release", "budget_ms")


def bench_run(**knobs: object) -> RuntimeConfig:
    """The run settings every cell shares: `knobs` (of RUN_KNOBS) over a run's defaults but
    the engine (a bench's is the simulated one), a bad one named as the bench's flag."""
    knobs = {"engine": "sim", **knobs}
    check_engine(knobs["engine"], knobs.get("url"))  # type: ignore[arg-type]
    try:
        return RuntimeConfig.of(**knobs)
    except ConfigError as err:
        raise as_flag(err) from err


def check_engine(engine: str, url: str | None) -> None:
    """The engines a bench runs on, and a server's URL with --engine openai alone."""
    if engine not in BENCH_ENGINES:
        raise ConfigError("--engine", f"must be one of {', '.join(BENCH_ENGINES)}")
    if (engine == "openai") != (url is not None):
        raise ConfigError("--url", "--engine openai needs the server's --url, and only it "
                          "takes one")


def as_flag(err: ConfigError) -> ConfigError:
    """`err` named as the bench's flag (`--gen-threads`) rather than the run's knob."""
    flag = f"--{err.field.replace('_', '-')}"
    return ConfigError(flag, str(err).removeprefix(f"{err.field}: "))


@dataclass(frozen=True)
class BenchConfig:
    # The run's own settings every cell shares (the engine, model, server, passes, threads...:
    # RUN_KNOBS, `bench_run`); each run of a cell sets its executor, concurrency and nprobe.
    # --engine openai: `run.llm.url` is the server both ragraph and the app call.
    run: RuntimeConfig = field(default_factory=bench_run)
    workflows: tuple[str, ...] = ("oneshot", "multistep", "irg")
    workflow_dir: Path = Path("workflows")
    mix: bool = True  # also a random mix of the workflows
    executors: tuple[str, ...] = EXECUTOR_ORDER
    nprobes: tuple[int, ...] = (32, 128)
    offline: bool = True
    offline_requests: int = 64
    rates: tuple[float, ...] | None = None  # None: around the offline throughputs; (): none
    rate_points: int = 5
    window_s: float = 20.0  # arrival window of each online run
    max_online_requests: int = 600
    # Requests in flight for every executor, one set of cells per value. Max throughput is about
    # what the machine holds: at 16 the thread pool and the wavefront were both bound by their
    # per-request latency with the cores 65-80% busy (quick bench: ragraph vs sequential 1.23x /
    # 1.03x / 1.25x on oneshot / multistep / IRG at 16, 1.38x / 1.36x / 1.36x at 64).
    concurrencies: tuple[int, ...] = (64,)
    scale: int = 2_000_000
    nlist: int | None = None
    seed: int = 0
    # Which questions each run asks: uniform (each in turn) or Zipf popularity
    # (`bench.data.traffic`).
    traffic: Traffic = UNIFORM
    data: Path | None = None
    out: Path = Path("bench-out")
    slo_s: float = 10.0
    plots: bool = True
    quick: bool = False
    # Each pass's worth instead of the executors side by side (`bench.run.ablation`); `variants`:
    # only those of the ablation's runs, by label (None: all).
    ablation: bool = False
    variants_chosen: tuple[str, ...] | None = None
    # Every cell run this many times in turn; the tables read each executor's median run
    # (`bench.output.repeats`).
    repeat: int = 1

    @classmethod
    def of(cls, **settings: object) -> BenchConfig:
        """The bench's settings with the run's knobs (RUN_KNOBS, by their flags' names:
        `engine="openai", url=...`) among them, those going to `run`."""
        knobs = {name: settings.pop(name) for name in RUN_KNOBS if name in settings}
        return cls(run=bench_run(**knobs), **settings)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if not self.workflows:
            raise ConfigError("--workflows", "name at least one workflow")
        check_engine(self.run.llm.engine, self.run.llm.url)
        for name in self.executors:
            if name not in EXECUTORS:
                raise ConfigError("--executors", f"unknown executor {name!r}")
        for name in ("offline_requests", "rate_points", "max_online_requests", "repeat"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')}", "must be >= 1")
        if not self.concurrencies or min(self.concurrencies) < 1:
            raise ConfigError("--concurrency", "give positive numbers of requests in flight")
        if not self.nprobes or min(self.nprobes) < 1:
            raise ConfigError("--nprobe", "give positive nprobe values")
        for value in self.concurrencies:  # each value a cell: each within the run's bound
            positive_int("--concurrency", value, MAX_CONCURRENCY)
        for value in self.nprobes:
            positive_int("--nprobe", value, MAX_NPROBE)
        if self.rates is not None and any(r <= 0 for r in self.rates):
            raise ConfigError("--rates", "request rates must be > 0")
        if not self.offline and not self.rates:
            raise ConfigError("--rates", "an online-only run (--no-offline) needs explicit --rates")
        if self.scale < 0:
            raise ConfigError("--scale", f"must be >= 0, got {self.scale}")
        if not self.slo_s > 0 or not self.window_s > 0:
            raise ConfigError("--slo", "the SLO and the online window must be > 0 seconds")
        if self.variants_chosen is not None and not self.ablation:
            raise ConfigError("--variants", "chooses among the ablation's runs: give --ablation")
        self.variants()  # an unknown --variants label fails here, before any index is built
        try:  # the first concurrency and nprobe are checked where the run's settings are
            self.runtime()
        except ConfigError as err:
            raise as_flag(err) from err

    def runtime(self, index: str | None = None) -> RuntimeConfig:
        """The run settings every cell shares, on the bench index at `index`."""
        return self.run.with_knobs(index=index, concurrency=self.concurrencies[0],
                                   nprobe=self.nprobes[0])

    @property
    def api_key(self) -> str | None:
        """The upstream server's key, from the variable --api-key-env names."""
        from ragraph.runtime.llm.http.openai import api_key_from

        return api_key_from(self.run.llm.api_key_env)

    def variants(self) -> list[Variant]:
        """The runs of every cell: each executor, or the pass ablation of ragraph. On llama.cpp
        ragraph also runs without its prefix store: what document-prefix reuse is worth. On a
        server, after the LangGraph app, the server alone on the app's generation calls: the
        most any client of it could serve (`bench.server.alone`)."""
        from ragraph.bench.run.ablation import ablation_variants

        passes, engine = self.run.scheduler.passes, self.run.llm.engine
        if self.ablation:
            return ablation_variants(self.executors, passes, self.variants_chosen)
        out = plain(self.executors, passes)
        if engine == "llamacpp" and "ragraph" in self.executors:
            out.insert(1, Variant(NO_REUSE, "ragraph", passes, (("prefix_reuse", False),)))
        if engine == "openai" and "langgraph" in self.executors:
            out.insert(out.index(plain(("langgraph",), passes)[0]) + 1,
                       Variant(SERVER_ALONE, SERVER_ALONE, passes))
        return out

    @property
    def workloads(self) -> tuple[str, ...]:
        mixed = ("mix",) if self.mix and len(self.workflows) > 1 else ()
        return self.workflows + mixed


def file_knobs(path: Path) -> dict[str, object]:
    """A --config file's knobs that a bench takes (`RUN_KNOBS`, and one concurrency and nprobe
    to sweep), by name; any other is an error naming it and the file."""
    tree = read_config(path)
    knobs: dict[str, object] = {}
    for part, values in tree.items():
        for name, value in (values.items() if isinstance(values, dict) else [(part, values)]):
            if name not in (*RUN_KNOBS, "concurrency", "nprobe"):
                key = name if name == part else f"{part}.{name}"
                raise ConfigError(key, f"in {path}: ragraph bench does not take it (it runs "
                                  "every executor, on an index of its own)")
            knobs[name] = value
    return knobs
