"""`llama_cpp.Llama` configured like the engine, for differential tests and the benchmark.

The engine loads weights without llama.cpp's extra buffer types (see
`ContextShape.extra_buffers`); `Llama` has no argument for that, so its model parameters are
adjusted while it loads. Also used to launch `llama_cpp.server` the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def plain_weight_buffers() -> Iterator[None]:
    """While active, `Llama(...)` loads weights with `use_extra_bufts = False`."""
    import llama_cpp.llama as high  # noqa: PLC0415 - keep llama_cpp optional at import time

    original = high.llama_cpp.llama_model_default_params

    def params() -> Any:
        p = original()
        p.use_extra_bufts = False
        return p

    high.llama_cpp.llama_model_default_params = params
    try:
        yield
    finally:
        high.llama_cpp.llama_model_default_params = original


def reference_llama(model_path: str, n_ctx: int = 2048, n_threads: int = 2,
                    logits_all: bool = False) -> Any:
    """A `llama_cpp.Llama` whose greedy `create_completion` the engine must reproduce."""
    from llama_cpp import Llama  # noqa: PLC0415

    with plain_weight_buffers():
        return Llama(model_path=model_path, n_ctx=n_ctx, n_threads=n_threads,
                     n_threads_batch=n_threads, logits_all=logits_all, verbose=False)
