"""``tether serve``: the conversation service — authenticated, with runs detached from HTTP
connections, durable resumable event streams, and several processes on one PostgreSQL database.

See docs/serve.md (how to run it, every route) and docs/adr/0009-serve.md (the decisions).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import cast

from tether.serve._app import SECURITY_HEADERS, create_app
from tether.serve._auth import LOCAL_OWNER, is_loopback
from tether.serve._config import CONFIG_ENV, ServeConfig
from tether.serve._loading import load_model, load_tools
from tether.serve._runs import Caller, RunManager
from tether.stores._events_sqlite import SQLiteEventLog
from tether.stores._users import UserStore

__all__ = [
    "CONFIG_ENV",
    "LOCAL_OWNER",
    "SECURITY_HEADERS",
    "Caller",
    "RunManager",
    "ServeConfig",
    "create_app",
    "is_loopback",
    "load_model",
    "load_tools",
    "open_user_store",
]


@asynccontextmanager
async def open_user_store(
    *, db: str | None = None, postgres: str | None = None, schema: str | None = None
) -> AsyncGenerator[UserStore]:
    """The users and tokens of the service database (SQLite file ``db`` or PostgreSQL ``postgres``)."""
    if postgres is not None:
        module = importlib.import_module("tether.stores._events_postgres")
        users = cast(UserStore, module.PostgresEventLog(postgres, schema=schema))
    else:
        assert db is not None
        users = SQLiteEventLog(db)
    try:
        yield users
    finally:
        await users.close()
