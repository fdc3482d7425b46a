"""ragraph: compile RAG workflows into fine-grained graphs and run many requests at once."""

__version__ = "0.1.0"
