"""The agent runtime: Agent, tools, the run loop, results, approvals and streamed events."""

from tether.agent._agent import Agent
from tether.agent._approvals import (
    Approve,
    Deferred,
    DeferredResults,
    Deny,
    ExternalResult,
    MemoryReplayGuard,
    PendingCall,
    ReplayGuard,
)
from tether.agent._batch import CANCELED_WHILE_RUNNING_TEXT, UNKNOWN_OUTCOME_TEXT
from tether.agent._context import MessagesView, RunContext
from tether.agent._output import OUTPUT_TOOL
from tether.agent._recorder import CompactedLog, OnConflict, RunRecorder, StoreRecorder
from tether.agent._result import (
    CompactionEvent,
    Event,
    MessageCompleted,
    ReasoningEvent,
    Result,
    RunCompleted,
    TextEvent,
    ToolCallDeltaEvent,
    ToolCallFinished,
    ToolCallStarted,
)
from tether.agent._run import STEP_LIMIT_TEXT, cancelled_partial
from tether.agent._state import CANCELED_STOP_REASON
from tether.agent._stream import RunStream
from tether.agent._tools import Tool, ToolCanceled, function_tool
from tether.agent._toolset import SchemaTool, Toolset
from tether.agent.compaction import (
    DEFAULT_SUMMARY_PROMPT,
    Compaction,
    CompactionReport,
    CompactionStep,
    CompactionStrategy,
)
from tether.agent.compaction._compactor import Compactor, Prepared
from tether.agent.compaction._recall import recall_tool

__all__ = [
    "CANCELED_STOP_REASON",
    "CANCELED_WHILE_RUNNING_TEXT",
    "DEFAULT_SUMMARY_PROMPT",
    "OUTPUT_TOOL",
    "STEP_LIMIT_TEXT",
    "UNKNOWN_OUTCOME_TEXT",
    "Agent",
    "Approve",
    "CompactedLog",
    "Compaction",
    "CompactionEvent",
    "CompactionReport",
    "CompactionStep",
    "CompactionStrategy",
    "Compactor",
    "Deferred",
    "DeferredResults",
    "Deny",
    "Event",
    "ExternalResult",
    "MemoryReplayGuard",
    "MessageCompleted",
    "MessagesView",
    "OnConflict",
    "PendingCall",
    "Prepared",
    "ReasoningEvent",
    "ReplayGuard",
    "Result",
    "RunCompleted",
    "RunContext",
    "RunRecorder",
    "RunStream",
    "SchemaTool",
    "StoreRecorder",
    "TextEvent",
    "Tool",
    "ToolCallDeltaEvent",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolCanceled",
    "Toolset",
    "cancelled_partial",
    "function_tool",
    "recall_tool",
]
