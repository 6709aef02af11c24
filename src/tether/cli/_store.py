"""Where the command line keeps conversations: a SQLite store in the user data directory."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

import platformdirs
import typer

from tether.cli._common import fail
from tether.errors import NotFound, StoreError
from tether.stores import ConversationInfo, SQLiteStore, Store

__all__ = [
    "DEFAULT_OWNER",
    "SHORT_ID",
    "DbOpt",
    "OwnerOpt",
    "default_db_path",
    "open_store",
    "resolve_conversation",
    "short_conversation_id",
    "short_ids",
]

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
    store = SQLiteStore(path)
    try:
        await store.__aenter__()  # connects now: a bad file fails before any model call
    except StoreError as exc:
        _explain_read_only(path, exc)
        raise
    try:
        yield store
    finally:
        await store.close()


def _explain_read_only(path: Path, exc: StoreError) -> None:
    """A database SQLite cannot open because it cannot write there: say that, not "unable to open
    database file" (SQLite writes the file and, in WAL mode, its -wal and -shm files beside it)."""
    parent = path.parent if str(path.parent) else Path(".")
    not_writable = [str(p) for p in (path, parent) if p.exists() and not os.access(p, os.W_OK)]
    if not_writable:
        fail(
            f"cannot open database {path}: not writable: {', '.join(not_writable)} (SQLite writes the "
            "file and its -wal and -shm files beside it, even to read); use a writable directory (copy "
            "the file there)",
            cause=exc,
        )


SHORT_ID = 8
"""Characters a short conversation id has at least. UUIDv7 ids begin with their creation time, so
ids made minutes apart share their first characters; their random ends tell them apart."""


def _matches(given: str, conversation_id: str) -> bool:
    """``given`` begins or ends the id (ignoring case: a hex id may be typed in capitals)."""
    given, conversation_id = given.lower(), conversation_id.lower()
    return conversation_id.startswith(given) or conversation_id.endswith(given)


def short_ids(ids: Iterable[str], *, among: Iterable[str] = ()) -> dict[str, str]:
    """Each id's shortest unique ending, at least :data:`SHORT_ID` characters: the shortest suffix
    that no other id (of ``ids`` and ``among``) starts or ends with, so
    :func:`resolve_conversation` finds exactly that id by it. An id with no such suffix keeps its
    full form."""
    wanted = list(dict.fromkeys(ids))
    everyone = set(wanted) | set(among)
    short: dict[str, str] = {}
    for cid in wanted:
        others = [other for other in everyone if other != cid]
        short[cid] = cid
        for size in range(min(SHORT_ID, len(cid)), len(cid)):
            suffix = cid[-size:]
            if not any(_matches(suffix, other) for other in others):
                short[cid] = suffix
                break
    return short


async def short_conversation_id(store: Store, owner: str, conversation_id: str) -> str:
    """The short form of ``conversation_id`` among ``owner``'s stored conversations (what
    ``tether logs list`` shows and what ``tether logs show``/``tether chat --cid`` accept)."""
    stored = [c.conversation_id for c in await store.conversations(owner)]
    return short_ids([conversation_id], among=stored)[conversation_id]


def _describe(candidates: Sequence[ConversationInfo], short: dict[str, str], limit: int = 5) -> str:
    shown = [
        f"{short[c.conversation_id]} ({c.updated_at:%Y-%m-%d %H:%M} {(c.preview or '').strip()[:24]!r})"
        for c in candidates[:limit]
    ]
    more = f" and {len(candidates) - limit} more" if len(candidates) > limit else ""
    return ", ".join(shown) + more


async def resolve_conversation(store: Store, owner: str, given: str | None) -> str:
    """The conversation id meant by ``given``: an exact id, a unique prefix or suffix of one (the
    short form ``tether logs list`` shows), or (``None``) the most recently updated conversation.
    An ambiguous one fails listing the candidates by their short forms."""
    if given is None:
        recent = await store.conversations(owner, limit=1)
        if not recent:
            whose = "" if owner == DEFAULT_OWNER else f" for owner {owner!r}"
            fail(f"there are no stored conversations{whose} yet (start one with: tether chat)")
        return recent[0].conversation_id
    given = given.strip()
    if not given:
        fail("the conversation id is empty")
    try:
        return (await store.info(owner, given)).conversation_id
    except NotFound:
        pass
    infos = await store.conversations(owner)
    candidates = [c for c in infos if _matches(given, c.conversation_id)]
    if len(candidates) == 1:
        return candidates[0].conversation_id
    if candidates:
        short = short_ids((c.conversation_id for c in candidates), among=(c.conversation_id for c in infos))
        fail(
            f"conversation id {given!r} is ambiguous: it begins or ends {len(candidates)} conversations: "
            f"{_describe(candidates, short)}; give more characters"
        )
    fail(f"no conversation {given!r} for owner {owner!r}")
