"""ragraph: compile RAG workflows into fine-grained graphs and run many requests at once."""

from typing import Any

from ragraph.ir import END, START, RAGraph

__version__ = "0.1.0"
# The Python API (ragraph/api), imported on first use: `import ragraph` stays cheap.
API = ("Answer", "Event", "Finished", "NodeCompleted", "Runtime", "Speculation", "Timings",
       "Token", "Usage", "load")
__all__ = ["END", "START", "RAGraph", "__version__", *API]


def __getattr__(name: str) -> Any:
    if name in API:
        import ragraph.api

        return getattr(ragraph.api, name)
    raise AttributeError(f"module 'ragraph' has no attribute {name!r}")
