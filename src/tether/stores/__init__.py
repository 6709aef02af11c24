"""Conversation stores: the Store protocol and memory/SQLite/PostgreSQL implementations.

``SQLiteStore`` is the default (one file, several processes of one machine); ``PostgresStore``
(the ``postgres`` extra) serves many application servers; ``MemoryStore`` is for tests. Decisions
about the schema, versions, corrupt rows and encryption: docs/adr/0003-store-schema.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.stores._crypto import Keyring
from tether.stores._memory import MemoryStore
from tether.stores._protocol import (
    ConversationInfo,
    ExpireHook,
    Loaded,
    MessageHit,
    OnCorrupt,
    SearchMethod,
    SearchResults,
    Store,
    ToolEffect,
)
from tether.stores._records import RECORD_VERSION, CompactionRecord, dumps_record, loads_record
from tether.stores.sqlite import SQLiteStore

if TYPE_CHECKING:
    from tether.stores.postgres import PostgresStore

__all__ = [
    "RECORD_VERSION",
    "CompactionRecord",
    "ConversationInfo",
    "ExpireHook",
    "Keyring",
    "Loaded",
    "MemoryStore",
    "MessageHit",
    "OnCorrupt",
    "PostgresStore",
    "SQLiteStore",
    "SearchMethod",
    "SearchResults",
    "Store",
    "ToolEffect",
    "dumps_record",
    "loads_record",
]


def __getattr__(name: str) -> Any:
    # PostgresStore needs the optional psycopg extra: import it on first use, so that
    # ``import tether.stores`` works without it and a missing extra raises MissingExtra then.
    if name == "PostgresStore":
        from tether.stores.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
