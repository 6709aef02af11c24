"""Every span, attribute, event and metric name tether's telemetry writes.

Names of the OpenTelemetry semantic conventions are spelled here (tether needs only
``opentelemetry-api`` at run time); ``tests/telemetry/test_names.py`` checks each against the
constant of ``opentelemetry-semantic-conventions``. Names starting ``tether.`` are tether's own.
"""

from __future__ import annotations

from typing import Final

# -- GenAI semantic conventions ------------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_OUTPUT_TYPE: Final = "gen_ai.output.type"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"

OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
OP_EXECUTE_TOOL: Final = "execute_tool"

GEN_AI_CLIENT_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
GEN_AI_CLIENT_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"

# -- general semantic conventions ----------------------------------------------------------------
ERROR_TYPE: Final = "error.type"
DB_SYSTEM_NAME: Final = "db.system.name"
DB_OPERATION_NAME: Final = "db.operation.name"
DB_COLLECTION_NAME: Final = "db.collection.name"
DB_NAMESPACE: Final = "db.namespace"

# -- tether's own ----------------------------------------------------------------------------------
TETHER_RUN_ID: Final = "tether.run.id"
TETHER_RUN_OUTCOME: Final = "tether.run.outcome"
"""``completed`` | ``deferred`` | ``failed`` | ``canceled``."""
TETHER_RUN_STAGE: Final = "tether.run.stage"
TETHER_RUN_REQUESTS: Final = "tether.run.requests"
TETHER_RUN_TOOL_EXECUTIONS: Final = "tether.run.tool_executions"
TETHER_RUN_RESUMED: Final = "tether.run.resumed"
TETHER_RUN_PENDING_CALLS: Final = "tether.run.pending_calls"
TETHER_PARTIAL_REQUESTS: Final = "tether.partial.requests"
TETHER_PARTIAL_TOOL_EXECUTIONS: Final = "tether.partial.tool_executions"
TETHER_PARTIAL_INPUT_TOKENS: Final = "tether.partial.usage.input_tokens"
TETHER_PARTIAL_OUTPUT_TOKENS: Final = "tether.partial.usage.output_tokens"
TETHER_PARTIAL_MESSAGES: Final = "tether.partial.messages"
TETHER_STEP: Final = "tether.step"

TETHER_TOOL_STATUS: Final = "tether.tool.status"
"""``ok`` | ``failed`` | ``invalid`` | ``denied`` | ``external`` | ``pending`` | ``not_run`` |
``outcome_unknown`` | ``interrupted``."""
TETHER_TOOL_FAILED: Final = "tether.tool.failed"
TETHER_TOOL_SYNTHESIZED: Final = "tether.tool.synthesized"
TETHER_TOOL_APPROVAL: Final = "tether.tool.approval"
"""``pending`` | ``approved`` | ``denied`` (tools that need an approval)."""
TETHER_TOOL_LEDGER: Final = "tether.tool.ledger"
"""``started`` | ``outcome_unknown`` (side-effecting tools of a run with a recorder)."""
TETHER_TOOL_IDEMPOTENT: Final = "tether.tool.idempotent"

TETHER_LOSSES_EVENT: Final = "tether.request.losses"
TETHER_RESPONSE_LOSSES_EVENT: Final = "tether.response.losses"
TETHER_LOSSES_COUNT: Final = "tether.losses.count"
TETHER_LOSSES_DROPPED: Final = "tether.losses.dropped"
TETHER_LOSSES_APPROXIMATED: Final = "tether.losses.approximated"
TETHER_LOSSES_KINDS: Final = "tether.losses.kinds"
TETHER_LOSSES_WHAT: Final = "tether.losses.what"

TETHER_HISTORY_NORMALIZE: Final = "tether.history.normalize"
TETHER_HISTORY_PROCESS: Final = "tether.history.process"
TETHER_HISTORY_SANITIZE: Final = "tether.history.sanitize"
TETHER_HISTORY_PROCESSOR: Final = "tether.history.processor"
TETHER_HISTORY_MESSAGES_IN: Final = "tether.history.messages_in"
TETHER_HISTORY_MESSAGES_OUT: Final = "tether.history.messages_out"
TETHER_HISTORY_DROPPED: Final = "tether.history.dropped"
TETHER_HISTORY_SYNTHESIZED: Final = "tether.history.synthesized"
TETHER_HISTORY_REMOVED: Final = "tether.history.removed"
TETHER_HISTORY_TRUNCATED: Final = "tether.history.truncated"
TETHER_HISTORY_UNPAIRED: Final = "tether.history.unpaired"
TETHER_HISTORY_SYSTEM_PROMPTS: Final = "tether.history.system_prompts"
TETHER_HISTORY_UNSAFE_PARTS: Final = "tether.history.unsafe_parts"

TETHER_STORE_MESSAGES: Final = "tether.store.messages"
TETHER_STORE_VERSION: Final = "tether.store.version"
TETHER_STORE_FORK_ID: Final = "tether.store.fork_id"
TETHER_STORE_DELETED: Final = "tether.store.deleted"
TETHER_STORE_ENTRY_WRITTEN: Final = "tether.store.entry_written"
TETHER_STORE_PENDING_EFFECTS: Final = "tether.store.pending_effects"

TETHER_CONTENT_OMITTED: Final = "tether.content.omitted_messages"

TETHER_RUNS: Final = "tether.runs"
TETHER_TOOL_CALLS: Final = "tether.tool.calls"
TETHER_HISTORY_REPAIRS: Final = "tether.history.repairs"
TETHER_HISTORY_SANITIZED: Final = "tether.history.sanitized"
TETHER_REPAIR_KIND: Final = "tether.repair.kind"
TETHER_SANITIZE_KIND: Final = "tether.sanitize.kind"

OTHER: Final = "_OTHER"
"""The value of a low-cardinality attribute outside its known set (an unknown tool name)."""

TOKEN_BUCKETS: Final = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
DURATION_BUCKETS: Final = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
"""Bucket boundaries the GenAI conventions advise for the two histograms."""
