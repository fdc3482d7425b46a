"""Scale-out on Ray: IVF lists sharded across actors, LLM replicas behind prefix-aware routing.

- `ray_env`: Ray as an optional extra (`pip install "ragraph[ray]"`), connecting to a cluster.
- `shard_server`, `shard_pool`, `sharded`: a `SearchEngine` whose lists live on Ray actors, with
  the coarse quantizer on the scheduler's side; answers identical to the single-node engine.
  `search` opens one for a run (`--ray`).
- `routing`, `replicas`: an `LLMEngine` in front of several engines (prefix-aware, then
  least-loaded), failing over when one dies.
- `faults`: what was retried, for the run summary.

Ray is imported inside functions only, so this package imports without it.
"""
