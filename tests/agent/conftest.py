"""Agent test fixtures: ``store`` runs a test on MemoryStore, SQLiteStore (a real file) and
PostgresStore (the real server, its own schema, dropped afterwards)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tether.stores import MemoryStore, PostgresStore, SQLiteStore, Store


def _postgres_dsn() -> str:
    """The PostgreSQL DSN; unreachable fails in CI and skips (with the reason) elsewhere."""
    dsn = os.environ.get("TETHER_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL at {dsn} is required in CI and unreachable: {exc}")
        pytest.skip(f"PostgreSQL at {dsn} is unreachable: {exc}")
    return dsn


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store: in memory, a real SQLite file, or its own schema on the real PostgreSQL."""
    schema = f"tether_agent_{uuid.uuid4().hex[:12]}"
    dsn = _postgres_dsn() if request.param == "postgres" else ""
    s: Store
    if request.param == "memory":
        s = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "conversations.db")
    else:
        s = PostgresStore(dsn, schema=schema)
    try:
        yield s
    finally:
        await s.close()
        if dsn:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
