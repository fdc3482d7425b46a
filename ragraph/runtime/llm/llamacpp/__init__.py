"""The embedded llama.cpp engine."""
