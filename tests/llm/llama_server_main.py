"""Runs `python -m llama_cpp.server` with the engine's weight buffers (no AMX extra buffers,
which crash llama_decode on this machine's CPUs); command-line arguments pass through."""

import runpy

from ragraph.runtime.llm.llamacpp.reference import plain_weight_buffers

if __name__ == "__main__":
    with plain_weight_buffers():
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
