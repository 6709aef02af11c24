"""Pure functions over message lists: check, normalize, sanitize, trim, budget, prune.

The pairing rule, the repair rules and the sanitize limits are written down in
docs/adr/0002-history-repair.md.
"""

from tether.history._check import Problem, ProblemKind, check_history
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
    "INTERRUPTED_TEXT",
    "ApproximateCounter",
    "BudgetHistory",
    "CallRef",
    "DropReason",
    "HistoryRepair",
    "MediaKind",
    "Problem",
    "ProblemKind",
    "PruneReport",
    "SanitizeLimits",
    "SanitizeReport",
    "TiktokenCounter",
    "TokenCounter",
    "TrimHistory",
    "TrimReport",
    "UnpairedReason",
    "UnsafePart",
    "approximate_counter",
    "budget_history",
    "check_history",
    "close_calls",
    "normalize_history",
    "prune_history",
    "sanitize_history",
    "tiktoken_counter",
    "trim_history",
    "url_scheme",
]
