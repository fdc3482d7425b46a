"""`ragraph bench --ray` on a local multi-node Ray cluster: three nodes on this machine, one CPU
each (`ray.cluster_utils.Cluster`), shut down afterwards. Arguments go to `ragraph bench`:

    python benchmarks/ray_local_bench.py --index ~/.cache/ragraph/bench/index-... \\
        --shard-counts 1,2,3 --replica-counts 1,2,4 --requests 128 --concurrency 32
"""

from __future__ import annotations

import sys

import ray
from ray.cluster_utils import Cluster

from ragraph.cli.main import main

NODES = 3


def run(argv: list[str]) -> int:
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        for _ in range(NODES - 1):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        return main(["bench", "--ray", cluster.address, *argv])
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
