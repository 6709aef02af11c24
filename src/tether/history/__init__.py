"""Pure functions over message lists: check, normalize, sanitize, trim, budget, prune, compact.

The pairing rule, the repair rules and the sanitize limits are written down in
docs/adr/0002-history-repair.md; the compacted view in docs/adr/0010-compaction.md.
"""

from tether.history._check import Problem, ProblemKind, check_history
from tether.history._compact import (
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
from tether.history._compact_input import render_message, summary_chunks, summary_input
from tether.history._compact_search import SearchHit, format_hits, query_terms, search_messages
from tether.history._compact_tokens import TokenTally, Trigger
from tether.history._normalize import (
    INTERRUPTED_TEXT,
    CallRef,
    DropReason,
    HistoryRepair,
    UnpairedReason,
    close_calls,
    normalize_history,
)
from tether.history._prune import PruneReport, prune_history
from tether.history._sanitize import (
    MediaKind,
    SanitizeLimits,
    SanitizeReport,
    UnsafePart,
    sanitize_history,
    url_scheme,
)
from tether.history._tokens import (
    ApproximateCounter,
    TiktokenCounter,
    TokenCounter,
    approximate_counter,
    tiktoken_counter,
)
from tether.history._trim import (
    CACHE_SIZE,
    BudgetHistory,
    TrimHistory,
    TrimReport,
    budget_history,
    trim_history,
)

__all__ = [
    "CACHE_SIZE",
    "ELIDED_PREFIX",
    "INTERRUPTED_TEXT",
    "RECALL_HINT",
    "SUMMARY_CLOSE",
    "SUMMARY_NOTE",
    "SUMMARY_OPEN",
    "ApproximateCounter",
    "BudgetHistory",
    "CallRef",
    "DropReason",
    "ElideReport",
    "ElidedPart",
    "HistoryRepair",
    "MediaKind",
    "Problem",
    "ProblemKind",
    "PruneReport",
    "SanitizeLimits",
    "SanitizeReport",
    "SearchHit",
    "TiktokenCounter",
    "TokenCounter",
    "TokenTally",
    "Trigger",
    "TrimHistory",
    "TrimReport",
    "UnpairedReason",
    "UnsafePart",
    "approximate_counter",
    "budget_history",
    "check_history",
    "close_calls",
    "compacted_view",
    "compaction_boundary",
    "elide",
    "format_hits",
    "is_elided",
    "normalize_history",
    "prune_history",
    "query_terms",
    "render_message",
    "sanitize_history",
    "search_messages",
    "split_summary",
    "summary_chunks",
    "summary_input",
    "summary_part",
    "tiktoken_counter",
    "trim_history",
    "url_scheme",
]
