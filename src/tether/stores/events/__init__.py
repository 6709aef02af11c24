"""The service's durable run/event log and its users (``tether serve``).

``EventLog`` is the protocol: runs with their status, each run's append-only events, the live
tail other processes follow. ``SQLiteEventLog`` (one file, the same as the conversation store's)
and ``PostgresEventLog`` (the ``postgres`` extra, loaded on first use) implement it together with
``UserStore`` (the service's users and their tokens); ``MemoryEventLog`` is for tests. Decisions:
docs/adr/0009-serve.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.stores.events._log import (
    ACTIVE,
    TERMINAL,
    ActiveRunLimit,
    EventLog,
    LiveTail,
    LoggedEvent,
    ProcessInfo,
    RunRecord,
    RunStatus,
)
from tether.stores.events._memory import MemoryEventLog
from tether.stores.events._sqlite import SQLiteEventLog
from tether.stores.events._users import TOKEN_PREFIX, UserInfo, UserStore

if TYPE_CHECKING:
    from tether.stores.events._postgres import PostgresEventLog

__all__ = [
    "ACTIVE",
    "TERMINAL",
    "TOKEN_PREFIX",
    "ActiveRunLimit",
    "EventLog",
    "LiveTail",
    "LoggedEvent",
    "MemoryEventLog",
    "PostgresEventLog",
    "ProcessInfo",
    "RunRecord",
    "RunStatus",
    "SQLiteEventLog",
    "UserInfo",
    "UserStore",
]


def __getattr__(name: str) -> Any:
    # PostgresEventLog needs the optional psycopg extra: import it on first use (MissingExtra then)
    if name == "PostgresEventLog":
        from tether.stores.events._postgres import PostgresEventLog

        return PostgresEventLog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
