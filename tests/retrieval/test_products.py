"""The library computing the host scans' products: chosen by what is faster here, pinned by the
environment, the same float32 products either way, and torch's threads left as they were."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ragraph.errors import ConfigError
from ragraph.runtime.retrieval.ivf import products
from ragraph.runtime.retrieval.ivf.listmajor import MIN_SHARING, ListMajorRule
from ragraph.runtime.retrieval.ivf.products import OneThread, host_product, matmul_into

torch = pytest.importorskip("torch")


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.delenv(products.ENV, raising=False)
    host_product.cache_clear()
    yield
    host_product.cache_clear()


def test_the_choice_is_measured_once_and_can_be_pinned(fresh, monkeypatch):
    assert host_product(384) in products.PRODUCTS
    assert host_product.cache_info().misses == 1 and host_product(384) == host_product(384)
    for name in products.PRODUCTS:
        host_product.cache_clear()
        monkeypatch.setenv(products.ENV, name)
        assert host_product(384) == name
    host_product.cache_clear()
    monkeypatch.setenv(products.ENV, "mkl")
    with pytest.raises(ConfigError, match=products.ENV):
        host_product(384)


def test_both_libraries_write_float32_products_in_place_into_a_strided_view():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((5, 48)).astype(np.float32)
    vectors = rng.standard_normal((70, 48)).astype(np.float32)
    exact = q.astype(np.float64) @ vectors.T.astype(np.float64)
    for name in products.PRODUCTS:
        buf = np.full((9, 100), np.inf, dtype=np.float32)
        matmul_into(name, buf[2:7, :70], q, vectors)
        np.testing.assert_allclose(buf[2:7, :70], exact, rtol=0, atol=1e-4)
        assert np.isinf(buf[:2]).all() and np.isinf(buf[7:]).all() and np.isinf(buf[:, 70:]).all()


def test_one_thread_is_the_calling_threads_alone_and_put_back():
    before = torch.get_num_threads()
    seen: dict[str, int] = {}

    def worker() -> None:
        torch.set_num_threads(2)
        with OneThread("torch"):
            seen["inside"] = torch.get_num_threads()
        seen["after"] = torch.get_num_threads()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == {"inside": 1, "after": 2}
    assert torch.get_num_threads() == before  # another thread's setting, not this one's


def test_a_faster_product_takes_list_major_at_fewer_queries_a_list():
    assert MIN_SHARING["torch"] < MIN_SHARING["numpy"]
    flat = np.repeat(np.arange(10), 3)  # every list probed by 3 queries
    sizes = np.full(10, 10**6)
    assert ListMajorRule(sizes, 0, "torch").takes(flat)
    assert not ListMajorRule(sizes, 0, "numpy").takes(flat)
