"""The compacted view of a history: summaries that stand for older turns, elided parts, the
token tally that decides when to compact, the summarizer's input and the search over what was
cut (docs/adr/0010-compaction.md)."""

from tether.history.compact._input import render_message, summary_chunks, summary_input
from tether.history.compact._search import SearchHit, format_hits, query_terms, search_messages
from tether.history.compact._tokens import TokenTally, Trigger
from tether.history.compact._view import (
    ELIDED_PREFIX,
    RECALL_HINT,
    SUMMARY_CLOSE,
    SUMMARY_NOTE,
    SUMMARY_OPEN,
    ElidedPart,
    ElideReport,
    compacted_view,
    compaction_boundary,
    elide,
    is_elided,
    split_summary,
    summary_part,
)

__all__ = [
    "ELIDED_PREFIX",
    "RECALL_HINT",
    "SUMMARY_CLOSE",
    "SUMMARY_NOTE",
    "SUMMARY_OPEN",
    "ElideReport",
    "ElidedPart",
    "SearchHit",
    "TokenTally",
    "Trigger",
    "compacted_view",
    "compaction_boundary",
    "elide",
    "format_hits",
    "is_elided",
    "query_terms",
    "render_message",
    "search_messages",
    "split_summary",
    "summary_chunks",
    "summary_input",
    "summary_part",
]
