"""Every retry of a run, for its summary: a shard step re-sent, a generation failed over."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Fault:
    """One retry: what failed (`who`), during what (`during`), the error, and what was done."""

    who: str
    during: str
    error: str
    action: str

    def __str__(self) -> str:
        return f"{self.who} failed during {self.during} ({self.error}): {self.action}"


@dataclass
class FaultLog:
    """Appended from the search threads and the event loop alike, hence the lock."""

    _faults: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def snapshot(self) -> tuple[Fault, ...]:
        with self._lock:
            return tuple(self._faults)


@runtime_checkable
class ReportsFaults(Protocol):
    """An engine that retries on its own and says so."""

    def faults(self) -> tuple[Fault, ...]: ...


def faults_of(*engines: object) -> tuple[Fault, ...]:
    """The retries of every engine that reports them, in engine order."""
    return tuple(f for e in engines if isinstance(e, ReportsFaults) for f in e.faults())
