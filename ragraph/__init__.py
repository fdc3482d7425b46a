"""ragraph: compile RAG workflows into fine-grained graphs and run many requests at once."""

from ragraph.ir import END, START, RAGraph

__version__ = "0.1.0"
__all__ = ["END", "START", "RAGraph", "__version__"]
