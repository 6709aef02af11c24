"""Store fixtures: one contract suite over MemoryStore, SQLiteStore (a real file in tmp_path) and
PostgresStore (the real server; each test in its own schema, dropped afterwards)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

import psycopg
import pytest
from psycopg import sql

from tether.stores import Keyring, MemoryStore, PostgresStore, SQLiteStore, Store


class Clock:
    """A settable clock for retention tests."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class OpenStore(Protocol):
    def __call__(
        self,
        *,
        keyring: Keyring | None = None,
        clock: Callable[[], float] | None = None,
        require_encryption: bool | None = None,
    ) -> Store: ...


def _backend_params() -> list[Any]:
    return ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=_backend_params())
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def open_store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[OpenStore]:
    """Opens stores of this test's backend over one database (a memory store is a single instance,
    so only its first open honours the arguments). Every store opened is closed at teardown."""
    opened: list[Store] = []
    memory: dict[str, MemoryStore] = {}
    schema = request.getfixturevalue("pg_schema") if backend == "postgres" else ""
    dsn = request.getfixturevalue("pg_dsn") if backend == "postgres" else ""

    def make(
        *,
        keyring: Keyring | None = None,
        clock: Callable[[], float] | None = None,
        require_encryption: bool | None = None,
    ) -> Store:
        extra: dict[str, Any] = {} if clock is None else {"clock": clock}
        if backend == "memory":
            if "store" not in memory:
                memory["store"] = MemoryStore(**extra)
            return memory["store"]
        store: Store
        if require_encryption is not None:
            extra["require_encryption"] = require_encryption
        if backend == "sqlite":
            store = SQLiteStore(tmp_path / "tether.db", keyring=keyring, **extra)
        else:
            store = PostgresStore(dsn, schema=schema, keyring=keyring, **extra)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.close()


@pytest.fixture
async def store(open_store: OpenStore) -> Store:
    """A fresh, empty store of the parametrized backend."""
    return open_store()


RawSQL = Callable[..., list[tuple[Any, ...]]]


@pytest.fixture
def raw_sql(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> RawSQL:
    """Run SQL (``?`` placeholders) directly against this test's database, as an operator or an
    attacker with file/table access would, and commit."""
    if backend == "sqlite":

        def run_sqlite(query: str, *params: Any) -> list[tuple[Any, ...]]:
            conn = sqlite3.connect(tmp_path / "tether.db")
            try:
                with conn:
                    return conn.execute(query, params).fetchall()
            finally:
                conn.close()

        return run_sqlite
    if backend == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")

        def run_postgres(query: str, *params: Any) -> list[tuple[Any, ...]]:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
                cursor = conn.execute(query.replace("?", "%s").encode(), params)
                return cursor.fetchall() if cursor.description else []

        return run_postgres
    raise AssertionError(f"no raw SQL for {backend}")


durable = pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
"""Run a test on the stores that keep data in a database."""
