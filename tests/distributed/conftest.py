"""A local multi-node Ray cluster for the scale-out tests: three nodes on this machine with one
CPU each (`ray.cluster_utils.Cluster`), started once per session and shut down after it. Tests
that use it are `slow` (the cluster takes ~10 s to start on 2 cores)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.retrieval.conftest import data_dir, embedder, tie_vectors  # noqa: F401 (fixtures)

NODES = 3
CPUS_PER_NODE = 1


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    ray = pytest.importorskip("ray", reason='needs the ray extra: pip install "ragraph[ray]"')
    from ray.cluster_utils import Cluster

    # The nodes' workers import this checkout's ragraph and tests (crash-injecting shards).
    root = str(Path(__file__).resolve().parents[2])
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, saved]))
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": CPUS_PER_NODE, "include_dashboard": False})
    try:
        for _ in range(NODES - 1):
            cluster.add_node(num_cpus=CPUS_PER_NODE)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
