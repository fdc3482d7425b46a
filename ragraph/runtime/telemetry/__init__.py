"""OpenTelemetry spans of a run (`--otlp ENDPOINT`): a CHAIN span per request with a RETRIEVER,
EMBEDDING or LLM span per workflow node (and per sub-stage where the compiler split one), after
OpenInference's conventions (Arize Phoenix) and OpenTelemetry's GenAI ones. `spans.py` builds
them from the run's hooks, `otlp.py` exports them; the `otel` extra is imported only there."""
