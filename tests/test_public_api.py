"""Pins tether's public API: adding or removing a name must be a deliberate edit here."""

from __future__ import annotations

import tether

EXPECTED = {
    "Agent",
    "ApprovalError",
    "Approve",
    "CONTRACT_VERSION",
    "ConflictError",
    "ConversationInfo",
    "ConversionReport",
    "CorruptRecord",
    "DecodeError",
    "DeferredResults",
    "Deny",
    "Document",
    "EncryptionError",
    "Event",
    "ExternalResult",
    "FunctionModel",
    "HistoryError",
    "HistoryRepair",
    "HistoryTooLarge",
    "INTERRUPTED_TEXT",
    "Image",
    "Keyring",
    "MaxStepsError",
    "MemoryStore",
    "Message",
    "MessageCompleted",
    "MissingExtra",
    "Model",
    "ModelError",
    "ModelHTTPError",
    "ModelResponse",
    "ModelSettings",
    "NotFound",
    "OutputValidationError",
    "Part",
    "Partial",
    "PendingCall",
    "PostgresStore",
    "Problem",
    "Reasoning",
    "ReasoningEvent",
    "Result",
    "RunCanceled",
    "RunCompleted",
    "RunContext",
    "RunError",
    "RunStream",
    "SQLiteStore",
    "SanitizeLimits",
    "SanitizeReport",
    "Store",
    "StoreError",
    "TestModel",
    "TetherError",
    "Text",
    "TextEvent",
    "TokenCounter",
    "Tool",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolCanceled",
    "ToolDefinition",
    "ToolError",
    "ToolResult",
    "UnsupportedContent",
    "Usage",
    "UserError",
    "__version__",
    "approximate_counter",
    "assistant",
    "budget_history",
    "check_history",
    "dumps",
    "dumps_message",
    "function_tool",
    "infer_model",
    "json_schema",
    "loads",
    "loads_message",
    "new_id",
    "normalize_history",
    "prune_history",
    "sanitize_history",
    "system",
    "tiktoken_counter",
    "tool",
    "trim_history",
    "user",
}


def test_all_is_pinned() -> None:
    assert set(tether.__all__) == EXPECTED
    assert len(tether.__all__) == len(set(tether.__all__))


def test_every_name_resolves() -> None:
    for name in tether.__all__:
        assert getattr(tether, name) is not None


def test_every_error_is_a_tether_error() -> None:
    for name in tether.__all__:
        obj = getattr(tether, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert issubclass(obj, tether.TetherError), name
