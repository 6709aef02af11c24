"""The SQLite conversation store: one file, several processes of one machine.

``SQLiteStore`` over ``SQLiteThread`` (one connection on its own thread, shared with the service's
SQLite event log); schema, records, ledger, search and key rotation each in their own module.
"""

from tether.stores.sqlite._db import SQLiteThread
from tether.stores.sqlite._store import SQLiteStore

__all__ = ["SQLiteStore", "SQLiteThread"]
