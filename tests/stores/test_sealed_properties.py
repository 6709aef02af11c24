"""Property: whatever someone with write access does to a sealed value (a message row, the listing
preview, ledger arguments) — cut it, flip bits, replace it, change or remove its key id, store
another type — reading it raises only ``EncryptionError`` or ``CorruptRecord``, and a load with
``on_corrupt="skip"`` still returns every other message."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from tether import CorruptRecord, EncryptionError, Message, assistant, user
from tether.stores import Keyring, PostgresStore, SQLiteStore, Store

MESSAGES: list[Message] = [user("first"), assistant("second"), user("third")]
RING = Keyring({"k1": Keyring.generate_key(), "k2": Keyring.generate_key()}, current="k1")
PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
_BY_OWNER = "(SELECT pk FROM tether_conversations WHERE owner = ? AND id = 'c')"
TARGETS = {  # what is tampered with: (table, key column, data column, row filter)
    "msg": ("tether_messages", "key_id", "data", f"seq = 2 AND conversation = {_BY_OWNER}"),
    "preview": ("tether_conversations", "preview_key", "preview", "owner = ? AND id = 'c'"),
    "args": (
        "tether_tool_effects",
        "arguments_key",
        "arguments",
        f"call_id = 'call' AND conversation = {_BY_OWNER}",
    ),
}


class Database:
    """Raw SQL on the store's database (``?`` placeholders), as an attacker with write access."""

    def __init__(self, kind: str, path: Path, dsn: str = "", schema: str = "") -> None:
        self.kind, self.path, self.dsn, self.schema = kind, path, dsn, schema

    def run(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.path)
            try:
                with conn:
                    return conn.execute(query, params).fetchall()
            finally:
                conn.close()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            cursor = conn.execute(query.replace("?", "%s").encode(), params)
            return cursor.fetchall() if cursor.description else []


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        yield Database("sqlite", tmp_path / "s.db")
    else:
        yield Database(
            "postgres", tmp_path, request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
        )


def open_store(db: Database, *, require_encryption: bool | None = None) -> Store:
    if db.kind == "sqlite":
        return SQLiteStore(db.path, keyring=RING, require_encryption=require_encryption)
    return PostgresStore(db.dsn, schema=db.schema, keyring=RING, require_encryption=require_encryption)


@st.composite
def tampering(draw: st.DrawFn, kind: str) -> tuple[str, str, object]:
    """(target, column, new value): the data replaced, or the key id changed."""
    target = draw(st.sampled_from(sorted(TARGETS)))
    how = draw(st.sampled_from(["cut", "flip", "random", "grow", "key", "plaintext", "type"]))
    if how == "key":
        return target, "key", draw(st.sampled_from([None, "k2", "nope", ""]))
    if how == "plaintext":  # a plaintext value with the key id removed: an inserted row
        return target, "plaintext", b'{"role": "user", "parts": [{"type": "text", "text": "injected"}]}'
    if how == "type" and kind == "sqlite":  # SQLite keeps any type in any column
        return target, "data", draw(st.sampled_from(["text", 42, 1.5]))
    if how == "cut":
        return target, "cut", draw(st.integers(0, 40))
    if how == "flip":
        return target, "flip", (draw(st.integers(0, 200)), draw(st.integers(0, 7)))
    if how == "grow":
        return target, "grow", draw(st.binary(min_size=1, max_size=8))
    return target, "data", draw(st.binary(max_size=60))


def apply(db: Database, owner: str, target: str, how: str, value: object) -> bool:
    """Tamper with ``owner``'s conversation ``c``; True when the stored value really changed."""
    table, key_column, data_column, where = TARGETS[target]
    key, data = db.run(f"SELECT {key_column}, {data_column} FROM {table} WHERE {where}", owner)[0]
    sealed = bytes(data)
    if how == "key":
        db.run(f"UPDATE {table} SET {key_column} = ? WHERE {where}", value, owner)
        return value != key
    if how == "plaintext":
        db.run(f"UPDATE {table} SET {key_column} = NULL, {data_column} = ? WHERE {where}", value, owner)
        return True
    new: object
    if how == "cut":
        new = sealed[: int(value)]  # type: ignore[call-overload]
    elif how == "flip":
        at, bit = value  # type: ignore[misc]
        at %= len(sealed)
        new = sealed[:at] + bytes([sealed[at] ^ (1 << bit)]) + sealed[at + 1 :]
    elif how == "grow":
        new = sealed + value  # type: ignore[operator]
    else:
        new = value
    db.run(f"UPDATE {table} SET {data_column} = ? WHERE {where}", new, owner)
    return new != sealed


async def _outcome(call: Awaitable[object]) -> tuple[str, object]:
    """The result, or the type of a documented error; anything else propagates and fails."""
    try:
        return "ok", await call
    except (EncryptionError, CorruptRecord) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("require_encryption", [None, False])
def test_tampered_sealed_values_raise_only_encryption_or_corrupt_record(
    database: Database, require_encryption: bool | None
) -> None:
    loop = asyncio.new_event_loop()
    store = open_store(database, require_encryption=require_encryption)
    owners = (f"owner-{n}" for n in itertools.count())
    strict = require_encryption is None  # the database was created empty with a keyring

    async def fill(owner: str) -> None:
        await store.create(owner, "c")
        await store.append(owner, "c", MESSAGES)
        await store.record_tool_started(owner, "c", "run", "call", "pay", '{"eur": 5}')

    @PROPERTY
    @given(change=tampering(database.kind))
    def check(change: tuple[str, str, object]) -> None:
        owner = next(owners)
        loop.run_until_complete(fill(owner))
        changed = apply(database, owner, *change)
        target, how, _ = change
        load = loop.run_until_complete(_outcome(store.load(owner, "c")))
        skipped = loop.run_until_complete(store.load(owner, "c", on_corrupt="skip"))  # never raises
        info = loop.run_until_complete(_outcome(store.info(owner, "c")))
        pending = loop.run_until_complete(_outcome(store.pending_tool_effects(owner, "c")))
        read = {"msg": load, "preview": info, "args": pending}[target]
        others = [o for name, o in (("msg", load), ("preview", info), ("args", pending)) if name != target]
        assert all(kind == "ok" for kind, _ in others)  # only the tampered value is affected
        if not changed:
            assert read[0] == "ok"
        elif strict or how != "plaintext":
            assert read[0] in ("EncryptionError", "CorruptRecord"), (change, read)
            assert "not valid tether JSON" not in str(read[1]) or how in ("key", "plaintext")
        if target == "msg":
            kept = [m.text for m in skipped.messages]
            if read[0] == "ok":
                assert skipped.corrupt == ()
            else:
                assert kept == ["first", "third"]
                assert [c.seq for c in skipped.corrupt] == [2]

    try:
        check()
    finally:
        loop.run_until_complete(store.close())
        loop.close()
