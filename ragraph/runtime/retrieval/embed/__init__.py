"""Query and passage embedders (sentence-transformers, int8, over HTTP)."""
