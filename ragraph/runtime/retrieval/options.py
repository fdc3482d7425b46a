"""What one request asks of its searches: how many passages (`k`), how they are ranked (`mode`:
dense vectors alone, or hybrid, fused with the keyword index by reciprocal rank fusion) and
which passages may be returned (`Where`: a source glob and exact passage fields).

Fusion is reciprocal rank fusion (Cormack et al., 2009) with the usual constant 60: a passage's
score is the sum of 1/(60 + rank) over the rankings it appears in. Each ranking is the top `k`
of its retriever; ties break by the smaller id, so the fused order is a function of the two
rankings alone and every executor returns the same passages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragraph.errors import ConfigError
from ragraph.ir.filters import Condition
from ragraph.ir.nodes import RETRIEVE_MODES as MODES

RRF_K = 60
MAX_K = 1000


@dataclass(frozen=True)
class Where:
    """Passages whose `source` matches the glob (SQLite GLOB: `*` matches any text, `/`
    included, so `guides/*` is a folder and `*.md` a file type) and whose `fields` equal the
    values given (any column of the passage store: `title`, `doc_id`, ...)."""

    source: str | None = None
    fields: tuple[tuple[str, str | int], ...] = ()

    @classmethod
    def from_json(cls, raw: Any, where: str) -> Where:
        if not isinstance(raw, Mapping) or not raw:
            raise ConfigError(where, "must be a non-empty object of passage fields, e.g. "
                              '{"source": "guides/*.md"}')
        fields = []
        for name, value in sorted(raw.items()):
            if not isinstance(value, str | int) or isinstance(value, bool):
                raise ConfigError(f"{where}.{name}", f"must be a string or integer, got {value!r}")
            if name != "source":
                fields.append((str(name), value))
        source = raw.get("source")
        if source is not None and not isinstance(source, str):
            raise ConfigError(f"{where}.source", "must be a glob string")
        return cls(source, tuple(fields))

    def to_json(self) -> dict[str, str | int]:
        return {**({"source": self.source} if self.source is not None else {}),
                **dict(self.fields)}

    @classmethod
    def of(cls, conditions: tuple[Condition, ...]) -> Where | None:
        """A retrieve node's filter (ir/filters.py): None when it has none."""
        return cls.from_json(dict(conditions), "filter") if conditions else None


@dataclass(frozen=True)
class SearchOptions:
    """A request's search options; None keeps what the workflow's retrieve node says."""

    k: int | None = None
    mode: str | None = None
    where: Where | None = None

    def __post_init__(self) -> None:
        check_k("k", self.k)
        check_mode("mode", self.mode)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], where: str) -> SearchOptions:
        """`k`, `mode` and `filter` of a request object (an input line, an HTTP body)."""
        k, mode, flt = raw.get("k"), raw.get("mode"), raw.get("filter")
        check_k(f"{where}k", k)
        check_mode(f"{where}mode", mode)
        return cls(k, mode, None if flt is None else Where.from_json(flt, f"{where}filter"))

    @classmethod
    def of(cls, k: int | None = None, mode: str | None = None,
           filter: Mapping[str, Any] | Where | None = None) -> SearchOptions:  # noqa: A002
        """The keyword arguments of `Runtime.run`, the retriever's `invoke`, checked."""
        where = filter if isinstance(filter, Where | None) else Where.from_json(filter, "filter")
        return cls(k, mode, where)

    def spec(self, workflow_k: int, workflow_mode: str = "dense",
             workflow_where: tuple[Condition, ...] = ()) -> SearchSpec:
        """One retrieval's search: these options over its node's `topk`, `mode` and filter
        (a request's filter replaces the node's, as its `k` replaces `topk`)."""
        return SearchSpec(self.k if self.k is not None else workflow_k,
                          self.mode if self.mode is not None else workflow_mode,
                          self.where if self.where is not None else Where.of(workflow_where))

    def over(self, base: SearchOptions) -> SearchOptions:
        """These options where given, `base`'s elsewhere (a call's over a question's own)."""
        return SearchOptions(self.k if self.k is not None else base.k,
                             self.mode if self.mode is not None else base.mode,
                             self.where if self.where is not None else base.where)

    @property
    def empty(self) -> bool:
        return self.k is None and self.mode is None and self.where is None

    def to_json(self) -> dict[str, Any]:
        return {**({"k": self.k} if self.k is not None else {}),
                **({"mode": self.mode} if self.mode is not None else {}),
                **({"filter": self.where.to_json()} if self.where is not None else {})}


@dataclass(frozen=True)
class SearchSpec:
    """One retrieval, resolved: `k` passages, ranked by `mode`, among those `where` allows."""

    k: int
    mode: str = "dense"
    where: Where | None = None


def check_k(field: str, k: object) -> None:
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K):
        raise ConfigError(field, f"must be an integer from 1 to {MAX_K}, got {k!r}")


def check_mode(field: str, mode: object) -> None:
    if mode is not None and mode not in MODES:
        raise ConfigError(field, f"must be one of {', '.join(MODES)}, got {mode!r}")


NO_OPTIONS = SearchOptions()


def fuse(rankings: Sequence[Sequence[int]], k: int) -> tuple[list[int], list[float]]:
    """Reciprocal rank fusion of best-first id lists: the top `k` ids and their scores, best
    first, ties by the smaller id."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking, start=1):
            score[pid] = score.get(pid, 0.0) + 1.0 / (RRF_K + rank)
    best = sorted(score.items(), key=lambda item: (-item[1], item[0]))[:k]
    return [pid for pid, _ in best], [s for _, s in best]
