"""Agent test fixtures: ``store`` runs a test on MemoryStore, SQLiteStore (a real file) and
PostgresStore (the real server, its own schema, dropped afterwards)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tether.stores import MemoryStore, PostgresStore, SQLiteStore, Store


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store: in memory, a real SQLite file, or its own schema on the real PostgreSQL."""
    s: Store
    if request.param == "memory":
        s = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "conversations.db")
    else:
        s = PostgresStore(request.getfixturevalue("pg_dsn"), schema=request.getfixturevalue("pg_schema"))
    try:
        yield s
    finally:
        await s.close()
