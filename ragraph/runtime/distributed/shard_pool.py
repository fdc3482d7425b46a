"""The shard actors, and the one way work reaches them: scatter by cluster, retry what failed.

Each shard is a Ray actor with `max_restarts`: when its process dies, Ray starts it again (it
reloads its lists from the shared path) and queues the calls sent meanwhile. A call that was in
flight fails with `RayActorError`; `scatter` then sends that shard's clusters again, to the other
holder of a replicated list when it has one, else to the restarting shard itself once it answers
again (a call sent before Ray has noticed the death fails too), and logs the retry. Errors raised by ragraph's own code inside a shard are not retried: they are re-raised.

`start_shards` starts the actors; a `ShardPool` uses them. The process that started them owns
them (closing its pool kills them); other processes, Serve replicas, attach to the same actors
(`RunningShards` pickles: Ray's actor handles do) and leave them running when they close.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ragraph.errors import SearchIndexError
from ragraph.runtime.distributed.faults import Fault, FaultLog
from ragraph.runtime.distributed.options import ScaleConfig
from ragraph.runtime.distributed.ray_env import require_ray
from ragraph.runtime.distributed.shard_server import ShardServer
from ragraph.runtime.retrieval.ivf.shard_lists import ShardSource
from ragraph.runtime.retrieval.ivf.shard_plan import ShardPlan, route_step

# (the shard's actor, its clusters for each task) -> an ObjectRef of the call
Call = Callable[[object, list[np.ndarray]], object]


@dataclass(frozen=True, eq=False)
class RunningShards:
    """Shard actors that are up: their plan, the list sizes, and their Ray handles."""

    plan: ShardPlan
    sizes: np.ndarray
    options: ScaleConfig
    source: ShardSource
    actors: tuple[object, ...]
    pids: tuple[int, ...]  # the first processes (a restarted shard has a new one)


def start_shards(plan: ShardPlan, source: ShardSource, sizes: np.ndarray,
                 options: ScaleConfig, server: type = ShardServer) -> RunningShards:
    """`plan.shards` actors spread over the cluster's nodes, each loading its own lists;
    `server`: the actor's class (a ShardServer; tests inject crashes with a subclass)."""
    ray = require_ray()
    remote = ray.remote(server).options(
        num_cpus=options.shard_cpus, max_restarts=options.max_restarts, max_task_retries=0,
        scheduling_strategy="SPREAD")
    threads = max(1, int(options.shard_cpus))
    actors = tuple(remote.remote(source, s, plan.clusters_of(s), sizes, threads)
                   for s in range(plan.shards))
    pids = _get([a.ready.remote() for a in actors])
    return RunningShards(plan, sizes, options, source, actors, tuple(pids))


class ShardPool:
    """The running shards as one search step sees them; `owner`: close() kills them."""

    def __init__(self, shards: RunningShards, faults: FaultLog, owner: bool) -> None:
        self.shards, self._faults, self._owner = shards, faults, owner
        self.plan, self._sizes, self._options = shards.plan, shards.sizes, shards.options
        self.actors, self.pids = list(shards.actors), list(shards.pids)

    def scatter(self, tasks: Sequence[np.ndarray], call: Call, during: str
                ) -> list[tuple[list[np.ndarray], object]]:
        """Each task's clusters routed to the shards holding them, `call` per shard, failed
        shares re-sent; (the clusters per task a call searched, its result) for every call that
        succeeded. Together they cover every task's clusters exactly once."""
        ray = require_ray()
        done: list[tuple[list[np.ndarray], object]] = []
        alive = set(range(self.plan.shards))
        todo = list(tasks)
        for attempt in range(1, self._options.attempts + 1):
            routes = route_step(todo, self.plan, self._sizes, alive)
            self._await_restart(routes.keys() - alive)
            refs = {s: call(self.actors[s], rows) for s, rows in routes.items()}
            failed: dict[int, str] = {}
            for s, ref in refs.items():
                try:
                    done.append((routes[s], _get(ref)))
                except ray.exceptions.RayActorError as err:
                    failed[s] = type(err).__name__
            if not failed:
                return done
            alive -= failed.keys()
            todo = _leftover([routes[s] for s in failed], len(tasks))
            if attempt < self._options.attempts:
                self._log(failed, {s: routes[s] for s in failed}, alive, during)
        raise SearchIndexError(f"shards {sorted(failed)} failed {self._options.attempts} times"
                               f" during {during}; giving up")

    def _await_restart(self, shards: set[int]) -> None:
        """Wait until each failed shard a re-send goes to answers again, up to `restart_s`:
        a call sent while Ray still takes the dead process for a live one fails as well. A shard
        dead for good, or slower than that, is left to the re-send to report."""
        ray = require_ray()
        deadline = time.monotonic() + self._options.restart_s
        for s in sorted(shards):
            while (left := deadline - time.monotonic()) > 0:
                try:
                    ray.get(self.actors[s].ready.remote(), timeout=left)
                    break
                except ray.exceptions.ActorUnavailableError:
                    time.sleep(0.05)  # not known dead yet: ask again
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                    break

    def _log(self, failed: dict[int, str], shares: dict[int, list[np.ndarray]],
             alive: set[int], during: str) -> None:
        for s, error in failed.items():
            mine = np.concatenate(shares[s]).tolist()
            moved = sum(any(h in alive for h in self.plan.holders[c]) for c in mine)
            action = (f"re-sent {len(mine)} cluster(s): {moved} to a replica, "
                      f"{len(mine) - moved} to shard {s} once restarted")
            self._faults.record(Fault(f"shard {s}", during, error, action))

    def close(self) -> None:
        if self._owner:
            stop_shards(self.shards)


def stop_shards(shards: RunningShards) -> None:
    ray = require_ray()
    for actor in shards.actors:
        ray.kill(actor, no_restart=True)


def _get(refs):
    ray = require_ray()
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as err:
        # ragraph's own error inside the shard: the same error here, not a retry.
        raise err.as_instanceof_cause() from None


def _leftover(shares: list[list[np.ndarray]], n: int) -> list[np.ndarray]:
    """The failed shards' clusters, per task."""
    return [np.concatenate([share[t] for share in shares]).astype(np.int64) for t in range(n)]
