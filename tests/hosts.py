"""Other machines than this one, for the tests whose path depends on the host.

ragraph reads five facts about the machine it runs on, each in one place:
- the cores it may use: `threads.usable_cores` (the affinity mask, `os.sched_getaffinity`);
- the last-level cache: `ivf.split.last_level_cache_bytes` (sysfs, `split.CPU_CACHES`), which
  decides whether a list-order step's lists fit in cache (`listmajor.ListMajorRule`);
- the library faster at a list-major scan's products: `ivf.products.host_product` (timed once
  per process; `RAGRAPH_HOST_MATMUL` pins it), which sets the sharing from which steps go
  list-major and so the query batch that fills one;
- from how many queries a list a list-major step beats faiss's cluster order on an index that
  outgrows the cache: `ivf.sharing_trial` (timed once per engine; `RAGRAPH_LIST_MAJOR_SHARING`
  pins it), here the library's own crossover (`listmajor.MIN_SHARING`);
- whether torch's int8 product sums exactly (VNNI or AMX): `embed.int8.int_mm_is_exact`.

A test that asserts one host's outcome passes only on hosts like it (a first embedding batch of
16 on the host it was written on was 24 on a 2-core EPYC where numpy's products won). So a
host-sensitive test takes the `host` fixture (tests/conftest.py): it runs once on each machine of
`HOSTS`, presented through those four readings, and asserts the rule for the host it is given."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Host:
    name: str
    cores: int
    cache: str  # the last-level cache as sysfs writes it ("2048K", "105M")
    product: str  # the faster library at the list products (products.PRODUCTS)
    exact_int8: bool  # torch's int8 product sums exactly (VNNI or AMX)


HOSTS = (
    # A small VM without fast int8 products, where numpy's BLAS wins the products; its cache
    # is smaller than the tests' random indexes, so their list-order steps do not fit in it.
    Host("2-cores-small-cache-no-amx", cores=2, cache="512K", product="numpy", exact_int8=False),
    # A 16-core Sapphire Rapids (AMX), where torch wins the products.
    Host("16-cores-large-cache-amx", cores=16, cache="105M", product="torch", exact_int8=True),
)


def present(host: Host, monkeypatch: pytest.MonkeyPatch, sysfs: Path) -> None:
    """Make this process read `host`'s facts instead of its own machine's until the test ends."""
    from ragraph.runtime.retrieval.ivf import split

    cores = frozenset(range(host.cores))
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(cores))
    monkeypatch.setattr(os, "cpu_count", lambda: host.cores)
    (sysfs / "index3").mkdir(parents=True)
    (sysfs / "index3" / "size").write_text(host.cache + "\n")
    monkeypatch.setattr(split, "CPU_CACHES", sysfs)
    pin_product(host.product, monkeypatch)
    _present_sharing(host, monkeypatch)
    _present_int8(host, monkeypatch)


def pin_product(product: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host products' library pinned (`RAGRAPH_HOST_MATMUL`) and measured anew when next
    asked; `leave` measures it again after the test."""
    from ragraph.runtime.retrieval.ivf import products

    monkeypatch.setenv(products.ENV, product)
    products.host_product.cache_clear()


def _present_sharing(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    """The list-major crossover of the host's library, instead of the trial this machine's
    engines would time."""
    from ragraph.runtime.retrieval.ivf import listmajor, sharing_trial

    monkeypatch.setenv(sharing_trial.ENV, str(listmajor.MIN_SHARING[host.product]))


def _present_int8(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    """The int8 product the host has: an exact kernel (the integers an int64 product gives),
    or none, so the exact float32 slices run."""
    try:
        import torch
    except ImportError:
        return
    from ragraph.runtime.retrieval.embed import int8

    monkeypatch.setattr(int8, "int_mm_is_exact", lambda _device: host.exact_int8)
    if host.exact_int8:
        monkeypatch.setattr(torch, "_int_mm", lambda a, b: (
            a.to(torch.int64) @ b.to(torch.int64)).to(torch.int32))


def leave(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's own facts again (the timed product is measured anew when next asked)."""
    from ragraph.runtime.retrieval.ivf import products

    monkeypatch.undo()
    products.host_product.cache_clear()
