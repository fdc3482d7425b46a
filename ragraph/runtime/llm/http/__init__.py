"""Engines behind an HTTP server (OpenAI-compatible, SGLang)."""
