"""The program's types moved to `ragraph.passes.lower` (lowering is the compiler's last step,
so the runtime never lowers). Kept while the scheduler's modules still import them from here;
new code imports `ragraph.passes.lower`."""

from ragraph.passes.lower import (
    GenerationChain,
    Program,
    Region,
    RetrievalChain,
)

__all__ = ["GenerationChain", "Program", "Region", "RetrievalChain"]
