"""``tether serve``: the conversation service — authenticated, with runs detached from HTTP
connections, durable resumable event streams, and several processes on one PostgreSQL database.

See docs/serve.md (how to run it, every route) and docs/adr/0009-serve.md (the decisions).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from tether.errors import MissingExtra
from tether.serve._config import CONFIG_ENV, ServeConfig, is_loopback
from tether.serve._loading import load_model, load_tools
from tether.stores import events as event_logs
from tether.stores.events import SQLiteEventLog, UserStore

if TYPE_CHECKING:
    from tether.serve._app import SECURITY_HEADERS, create_app
    from tether.serve._auth import LOCAL_OWNER
    from tether.serve._runs import Caller, RunManager

_NEEDS_EXTRA = {
    "SECURITY_HEADERS": "tether.serve._app",
    "create_app": "tether.serve._app",
    "LOCAL_OWNER": "tether.serve._auth",
    "Caller": "tether.serve._runs",
    "RunManager": "tether.serve._runs",
}

WORKER_APP = "tether.serve._main:app"
"""The uvicorn factory of a worker process (several workers): it reads its ``ServeConfig`` from
the ``CONFIG_ENV`` environment variable."""

__all__ = [
    "CONFIG_ENV",
    "LOCAL_OWNER",
    "SECURITY_HEADERS",
    "WORKER_APP",
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
        users: UserStore = event_logs.PostgresEventLog(postgres, schema=schema)
    else:
        assert db is not None
        users = SQLiteEventLog(db)
    try:
        yield users
    finally:
        await users.close()


def __getattr__(name: str) -> Any:
    # the HTTP side needs the optional serve extra (Starlette, uvicorn): load it on first use, so
    # that ``import tether.serve`` (and the command line) works without it
    module = _NEEDS_EXTRA.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        if isinstance(exc, MissingExtra):
            raise
        raise MissingExtra("tether serve", "serve", "starlette uvicorn") from exc
