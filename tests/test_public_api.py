"""Pins tether's public API: adding or removing a name must be a deliberate edit here."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import tether

SRC = Path(tether.__file__).resolve().parent

EXPECTED = {
    "CompactionStep",
    "CompactionStrategy",
    "CompactedLog",
    "Compaction",
    "CompactionEvent",
    "CompactionReport",
    "Compactor",
    "Prepared",
    "recall_tool",
    "CompactionRecord",
    "MessageHit",
    "SearchMethod",
    "SearchResults",
    "Telemetry",
    "aclose_model",
    "with_limits",
    "ToolCallDeltaEvent",
    "ApproximateCounter",
    "Loss",
    "MediaKind",
    "ModelFunction",
    "ProblemKind",
    "ReasoningReplay",
    "ResultPart",
    "Role",
    "TiktokenCounter",
    "Deferred",
    "MemoryReplayGuard",
    "OnConflict",
    "ReplayGuard",
    "RunRecorder",
    "StoreRecorder",
    "cancelled_partial",
    "RunStage",
    "BudgetHistory",
    "CallRef",
    "PruneReport",
    "TrimHistory",
    "TrimReport",
    "UnsafePart",
    "Profile",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "FunctionInfo",
    "ExpireHook",
    "Loaded",
    "OnCorrupt",
    "ToolEffect",
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
    "SchemaTool",
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
    "Toolset",
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


def _tether_classes() -> dict[str, str]:
    """Public class and type-alias names defined anywhere in tether's source: name -> module."""
    found: dict[str, str] = {}
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            names: list[str] = []
            if isinstance(node, ast.ClassDef):
                names = [node.name]
            elif (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(node.annotation, ast.Name)
                and node.annotation.id == "TypeAlias"
            ):
                names = [node.target.id]
            for name in names:
                if not name.startswith("_"):
                    found.setdefault(name, str(path.relative_to(SRC)))
    return found


def _annotation_names(obj: object) -> set[str]:
    """Identifiers used in the annotations of a public function, or of a class's public
    methods, properties and fields."""
    texts: list[str] = []

    def of_function(fn: object) -> None:
        annotations = getattr(fn, "__annotations__", {})
        texts.extend(str(a) for a in annotations.values())

    if inspect.isclass(obj):
        texts.extend(
            str(a) for a in getattr(obj, "__annotations__", {}).values() if not str(a).startswith("ClassVar")
        )
        for name, member in inspect.getmembers(obj):
            if name.startswith("_") and name != "__init__":
                continue
            if isinstance(member, property):
                of_function(member.fget)
            elif callable(member):
                of_function(member)
    elif callable(obj):
        of_function(obj)
    return {word for text in texts for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)}


def test_types_in_public_signatures_are_exported() -> None:
    """A type that a public API returns or accepts can be named by its users: it is exported."""
    defined = _tether_classes()
    exported = set(tether.__all__)
    missing: dict[str, set[str]] = {}
    for name in tether.__all__:
        for word in _annotation_names(getattr(tether, name)):
            if word in defined and word not in exported and word not in _NOT_PUBLIC:
                missing.setdefault(word, set()).add(name)
    assert missing == {}


_NOT_PUBLIC = {
    "Deps",  # type variables
    "Output",
    "OutputSpec",  # internal plumbing reachable only through private attributes
    "Instruments",  # what Telemetry resolves to inside tether.telemetry: OpenTelemetry handles
}
