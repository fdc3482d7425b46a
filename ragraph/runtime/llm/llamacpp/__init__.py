"""The embedded llama.cpp engine."""

import os

# ggml's CPU threads synchronise through OpenMP barriers, hundreds per forward pass. Sleeping at
# each one (OMP_WAIT_POLICY=PASSIVE) doubled a decode step; spinning without bound stalls when
# another thread takes a core. A bounded spin is fast both idle and beside a busy thread (figures:
# docs/benchmarks/code-figures.md#the-llamacpp-engine). libgomp reads this once, when it is
# loaded with llama_cpp, so it is set here, before any module of this package (or a client that
# imports the package first) imports llama_cpp; a user's own setting wins.
os.environ.setdefault("GOMP_SPINCOUNT", "10000")
