"""What a benchmark ran on: printed on every table and figure so numbers are never read out of
context (a simulated GPU engine on a 2-core VM is not a real GPU server)."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

from ragraph.runtime.threads import usable_cores


@dataclass(frozen=True)
class Machine:
    cpu_model: str
    cores: int
    memory_gib: float

    def describe(self) -> str:
        return f"{self.cores} cores, {self.cpu_model}, {self.memory_gib:.0f} GiB"


def detect(cpuinfo: Path = Path("/proc/cpuinfo"), meminfo: Path = Path("/proc/meminfo")) -> Machine:
    """CPU model and usable cores (the affinity mask: what this process may really use)."""
    model = platform.processor() or platform.machine() or "unknown CPU"
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    cores = usable_cores()
    memory = 0.0
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) / 2**20
                break
    return Machine(model, cores, memory)


def available_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """Memory the system can give a new workload without swapping (MemAvailable)."""
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 8 * 2**30  # not Linux: assume 8 GiB


def engine_label(engine: str, name: str, simulated: bool) -> str:
    """How an engine is named in output: a simulated one always says so."""
    if simulated:
        return f"SIMULATED {name}: no model runs, step times from the cost model"
    return f"real {engine} ({name})"
