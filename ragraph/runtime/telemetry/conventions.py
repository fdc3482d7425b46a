"""The attribute names spans carry: OpenInference's (what Phoenix reads), OpenTelemetry's GenAI
semantic conventions (what Jaeger, Grafana, Datadog and the Collector's processors read), and
ragraph's own under `ragraph.`. Both conventions are spelt out where they overlap (tokens,
model) so either kind of backend shows them.

Sources: OpenInference spec/semantic_conventions.md; OpenTelemetry semantic-conventions
docs/gen-ai/gen-ai-spans.md and the gen_ai attribute registry (development status)."""

from __future__ import annotations

# OpenInference
SPAN_KIND = "openinference.span.kind"
CHAIN, RETRIEVER, EMBEDDING, LLM = "CHAIN", "RETRIEVER", "EMBEDDING", "LLM"
INPUT_VALUE, INPUT_MIME = "input.value", "input.mime_type"
OUTPUT_VALUE, OUTPUT_MIME = "output.value", "output.mime_type"
DOCUMENTS = "retrieval.documents"  # .{i}.document.{id,score,content,metadata}
EMBEDDING_MODEL = "embedding.model_name"
EMBEDDING_TEXT = "embedding.embeddings.0.embedding.text"
LLM_MODEL = "llm.model_name"
LLM_PROVIDER = "llm.provider"
LLM_PROMPT_TOKENS = "llm.token_count.prompt"
LLM_COMPLETION_TOKENS = "llm.token_count.completion"
LLM_TOTAL_TOKENS = "llm.token_count.total"
LLM_CACHE_READ_TOKENS = "llm.token_count.prompt_details.cache_read"

# OpenTelemetry GenAI
OPERATION = "gen_ai.operation.name"  # chat | text_completion | embeddings | retrieval
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
ERROR_TYPE = "error.type"  # OpenTelemetry's general attribute: here the failure's kind

# ragraph's own
REQUEST_ID = "ragraph.request.id"  # the caller's id where it gave one
# The runtime's own id of the request, set beside a caller's (which need not be unique).
REQUEST_INTERNAL_ID = "ragraph.request.internal_id"
WORKFLOW = "ragraph.workflow"
NODE = "ragraph.node"
UNIT = "ragraph.unit"  # a sub-stage's unit id (search.probe, answer.decode, ...)
UNIT_KIND = "ragraph.unit.kind"  # embed-query, probe, search-steps, prefill, decode, ...
PATH = "ragraph.path"
NPROBE = "ragraph.retrieval.nprobe"
CLUSTERS = "ragraph.retrieval.clusters_searched"
STEPS = "ragraph.retrieval.steps"
HOT_HITS = "ragraph.retrieval.hot_cache_hits"
SPEC_LAUNCHED = "ragraph.speculation.launched"
SPEC_ADOPTED = "ragraph.speculation.adopted"
SPEC_DISCARDED = "ragraph.speculation.discarded"
SIMULATED = "ragraph.llm.simulated"
