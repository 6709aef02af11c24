"""Pins tether's public API: adding or removing a name must be a deliberate edit here."""

from __future__ import annotations

import tether

EXPECTED = {
    "CONTRACT_VERSION",
    "ApprovalError",
    "ConflictError",
    "CorruptRecord",
    "DecodeError",
    "Document",
    "EncryptionError",
    "HistoryError",
    "HistoryTooLarge",
    "Image",
    "MaxStepsError",
    "Message",
    "MissingExtra",
    "ModelError",
    "ModelHTTPError",
    "NotFound",
    "OutputValidationError",
    "Part",
    "Partial",
    "Reasoning",
    "RunCanceled",
    "RunError",
    "StoreError",
    "TetherError",
    "Text",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "UnsupportedContent",
    "Usage",
    "UserError",
    "__version__",
    "assistant",
    "dumps",
    "dumps_message",
    "json_schema",
    "loads",
    "loads_message",
    "new_id",
    "system",
    "tool",
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
