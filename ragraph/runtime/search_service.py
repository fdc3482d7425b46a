"""The search side as the executors see it: query text in, exact top-k passages out.

Queries are probed ONE per call: batched coarse quantization switches faiss to a BLAS kernel whose
last float bits differ from the single-query path, which could flip a near-tie cluster at the
nprobe boundary. Embedding may be batched (`embed_many`) because the query embedder is
batch-invariant (`ragraph.runtime.retrieval.embed.embedder.query_embedder`): a request's results never
depend on which other requests share its batch, so every executor returns the same passages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ragraph.errors import ConfigError, SearchIndexError
from ragraph.ir.values import Passages
from ragraph.runtime.retrieval.options import SearchSpec, Where, fuse
from ragraph.runtime.retrieval.protocol import (
    ScanOrder,
    SearchEngine,
    SearchTask,
    StepResult,
    TopK,
)

if TYPE_CHECKING:
    from ragraph.runtime.distributed.faults import Fault
    from ragraph.runtime.retrieval.ivf.cost import SearchCostModel
    from ragraph.runtime.retrieval.ivf.listmajor import ListMajorRule
    from ragraph.runtime.retrieval.tier.hotcache import HotClusterCache


class Embedder(Protocol):
    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], threads: int | None = None) -> np.ndarray: ...


class PassageLookup(Protocol):
    def lookup(self, ids: Sequence[int] | np.ndarray,
               scores: Sequence[float] | np.ndarray | None = None) -> Passages: ...

    def keyword_ids(self, text: str, k: int, where: Where | None = None) -> list[int]: ...

    def allowed_ids(self, where: Where) -> np.ndarray: ...


@dataclass
class SearchService:
    engine: SearchEngine
    embedder: Embedder
    store: PassageLookup
    nprobe: int = 32
    # Serializes embedder calls: torch modules are not re-entrant across threads cheaply.
    _embed_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Seconds spent inside the embedder: it runs one call at a time, so this over a run's wall
    # time says how close the embedder came to being the bottleneck.
    embed_seconds: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        if self.embedder.dim != self.engine.dim:
            raise SearchIndexError(
                f"embedder dimension {self.embedder.dim} does not match the index dimension "
                f"{self.engine.dim}"
            )

    def embed(self, text: str) -> np.ndarray:
        return self.embed_many([text])[0]

    def embed_many(self, texts: Sequence[str], threads: int | None = None) -> np.ndarray:
        """`threads`: cores for this call, for a caller that owns them meanwhile (nothing else
        of its own scans); None keeps the embedder's own setting."""
        with self._embed_lock:
            start = time.perf_counter()
            try:
                vectors = self.embedder.embed(list(texts), threads=threads)
                return np.asarray(vectors, dtype=np.float32)
            finally:
                self.embed_seconds += time.perf_counter() - start

    def embed_each(self, texts: Sequence[str], threads: int | None = None
                   ) -> list[np.ndarray | BaseException]:
        """One batch; when it fails, each text alone, so a failure is only its own text's."""
        try:
            return list(self.embed_many(texts, threads))
        except Exception:
            if len(texts) == 1:
                raise
        return [attempt(lambda t: self.embed_many([t], threads)[0], text) for text in texts]

    def embed_and_probe(self, texts: Sequence[str], nprobes: Sequence[int | None],
                        threads: int | None = None
                        ) -> list[tuple[np.ndarray, np.ndarray] | BaseException]:
        """The queries embedded in one batch and each probed alone: (vector, probe list), or the
        error that is only that query's."""
        vectors = self.embed_each(texts, threads)
        return [v if isinstance(v, BaseException) else attempt(self._with_probe, v, n)
                for v, n in zip(vectors, nprobes, strict=True)]

    def _with_probe(self, vector: np.ndarray, nprobe: int | None) -> tuple[np.ndarray, np.ndarray]:
        return vector, self.probe(vector, nprobe)

    # -- the engine, as the scheduler and the reports read it ----------------------------------

    @property
    def nlist(self) -> int:
        return self.engine.nlist

    @property
    def list_rule(self) -> ListMajorRule | None:
        return self.engine.list_rule

    @property
    def hot_cache(self) -> HotClusterCache | None:
        """The accelerator's hot-cluster cache the engine searches through (None: none)."""
        return getattr(self.engine, "cache", None)

    def cluster_of(self, ids: np.ndarray) -> np.ndarray:
        return self.engine.cluster_of(ids)

    def cost_model(self) -> SearchCostModel:
        """The engine's calibrated cost model (measured once per engine: blocking, ~0.2 s the
        first time)."""
        from ragraph.runtime.retrieval.ivf.cost import calibrated  # noqa: PLC0415

        return calibrated(self.engine)

    def faults(self) -> tuple[Fault, ...]:
        """The retries the engine made (a shard step re-sent; none for a local index)."""
        report = getattr(self.engine, "faults", None)
        return tuple(report()) if report is not None else ()

    def probes(self, nprobe: int | None) -> int:
        """The clusters a search at `nprobe` (None: the service's default) scans."""
        return min(nprobe or self.nprobe, self.engine.nlist)

    def faiss_search(self, vector: np.ndarray, k: int, nprobe: int | None) -> TopK:
        """faiss's own one-shot `index.search` of one query, as a plain application calls it
        (the LangGraph baseline), no stepwise engine in between."""
        import faiss  # noqa: PLC0415

        params = faiss.SearchParametersIVF(nprobe=self.probes(nprobe))
        distances, ids = self.engine.index.search(vector.reshape(1, -1), k, params=params)
        return TopK(distances[0], ids[0], np.empty(0, np.int64))

    # -- searching -------------------------------------------------------------------------------

    def probe(self, vector: np.ndarray, nprobe: int | None) -> np.ndarray:
        return self.engine.probe(vector.reshape(1, -1), self.probes(nprobe))[0]

    def step(self, tasks: Sequence[SearchTask], k: int,
             order: ScanOrder = ScanOrder.BALANCED) -> StepResult:
        return self.engine.search_step(tasks, k, order)

    def finish(self, vector: np.ndarray, probe: np.ndarray, partials: Sequence[TopK], k: int) -> TopK:
        return self.engine.finish(vector, probe, partials, k)

    def passages(self, topk: TopK) -> Passages:
        return self.store.lookup(topk.ids, topk.distances)

    def ranked(self, dense: TopK, query: str, spec: SearchSpec) -> Passages:
        """The passages of a retrieval from its dense top-k: those alone, or (hybrid) fused
        with the keyword index's top-k for `query` (options.py)."""
        if spec.mode == "dense":
            return self.passages(dense)
        if not hasattr(self.store, "keyword_ids"):
            raise ConfigError("mode", f"hybrid search needs a passage store with a keyword "
                              f"index; this one ({type(self.store).__name__}) has none")
        words = self.store.keyword_ids(query, spec.k, spec.where)
        ids, scores = fuse([[int(i) for i in dense.valid_ids], words], spec.k)
        return self.store.lookup(ids, scores)

    def filtered(self, vector: np.ndarray, probe: np.ndarray, spec: SearchSpec) -> TopK:
        """The exact dense top-k among the passages `spec.where` allows, in one call over the
        whole probe list (the engine's `search_filtered`)."""
        assert spec.where is not None
        search_filtered = getattr(self.engine, "search_filtered", None)
        if search_filtered is None:
            raise ConfigError("filter", f"the {type(self.engine).__name__} search engine "
                              "cannot filter")
        if not hasattr(self.store, "allowed_ids"):
            raise ConfigError("filter", f"this passage store ({type(self.store).__name__}) "
                              "cannot filter")
        allowed = self.store.allowed_ids(spec.where)
        if allowed.size == 0:  # a mistyped glob or value: said, not an empty answer
            raise ConfigError("filter", f"no passage of the index matches "
                              f"{spec.where.to_json()}")
        return search_filtered(vector, probe, spec.k, allowed)

    def search(self, text: str, k: int | SearchSpec, nprobe: int | None) -> Passages:
        """One-shot exact search for one query (what the baseline executors call)."""
        spec = k if isinstance(k, SearchSpec) else SearchSpec(k)
        vector = self.embed(text)
        probe = self.probe(vector, nprobe)
        if spec.where is not None:
            return self.ranked(self.filtered(vector, probe, spec), text, spec)
        # One query on one thread, as faiss's own `search` runs it: a thread pool's concurrency
        # comes from its threads.
        result = self.step([SearchTask.of(vector, probe)], spec.k, ScanOrder.QUERY)
        return self.ranked(self.finish(vector, probe, result.partials, spec.k), text, spec)


def attempt(fn, *args):
    """fn(*args), or the exception it raised (for per-item error attribution in batches)."""
    try:
        return fn(*args)
    except Exception as err:
        return err
