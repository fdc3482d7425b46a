"""Executors: the two baselines (sequential, stage-batched) and the wavefront scheduler."""
