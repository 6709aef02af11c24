"""Where the command line keeps conversations: a SQLite store in the user data directory."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

import platformdirs
import typer

from tether.cli._common import fail
from tether.errors import NotFound
from tether.stores import SQLiteStore, Store

__all__ = ["DEFAULT_OWNER", "DbOpt", "OwnerOpt", "default_db_path", "open_store", "resolve_conversation"]

DEFAULT_OWNER = "local"
"""The owner the command line reads and writes as, unless ``--owner`` says otherwise."""

DbOpt = Annotated[
    Path | None,
    typer.Option(
        "--db",
        envvar="TETHER_DB",
        help="SQLite database file (default: tether's file in your user data directory; env TETHER_DB).",
        show_default=False,
    ),
]
OwnerOpt = Annotated[
    str, typer.Option("--owner", help="Owner (tenant) whose conversations to use.", show_default=True)
]


def default_db_path() -> Path:
    """``<user data dir>/tether/conversations.db`` (platformdirs decides the directory per OS)."""
    return platformdirs.user_data_path("tether", appauthor=False) / "conversations.db"


@asynccontextmanager
async def open_store(db: Path | None, *, create: bool = True) -> AsyncGenerator[Store]:
    """Open the SQLite store at ``db`` (or the default path), closing it afterwards.

    With ``create=False`` a missing file is an error instead of a new, empty database.
    """
    path = db if db is not None else default_db_path()
    if path.is_dir():
        fail(f"database path {path} is a directory")
    if not path.exists():
        if not create:
            fail(f"no database at {path} (start one with: tether chat)")
        if db is None:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.parent.is_dir():
            fail(f"cannot create database {path}: directory {path.parent} does not exist")
    elif not os.access(path, os.R_OK):
        fail(f"cannot read database {path}: permission denied")
    async with SQLiteStore(path) as store:  # connects now: a bad file fails before any model call
        yield store


async def resolve_conversation(store: Store, owner: str, given: str | None) -> str:
    """The conversation id meant by ``given``: an exact id, a unique prefix of one, or (``None``)
    the most recently updated conversation."""
    if given is None:
        recent = await store.conversations(owner, limit=1)
        if not recent:
            fail("there are no stored conversations yet (start one with: tether chat)")
        return recent[0].conversation_id
    try:
        return (await store.info(owner, given)).conversation_id
    except NotFound:
        pass
    matches = [
        c.conversation_id for c in await store.conversations(owner) if c.conversation_id.startswith(given)
    ]
    if len(matches) == 1:
        return matches[0]
    if matches:
        fail(f"conversation id prefix {given!r} is ambiguous ({len(matches)} conversations match)")
    fail(f"no conversation {given!r} for owner {owner!r}")
