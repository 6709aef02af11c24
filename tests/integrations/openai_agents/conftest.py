"""Stores for the session tests: memory, SQLite (a real file) and PostgreSQL (the real server,
each test in its own schema), plain and encrypted at rest."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import set_tracing_disabled

from tether.stores import Keyring, MemoryStore, PostgresStore, SQLiteStore, Store

KEYRING = Keyring({"k1": b"k" * 32}, current="k1")


@pytest.fixture(autouse=True, scope="session")
def _no_tracing() -> None:
    set_tracing_disabled(True)  # the SDK would try to export traces to OpenAI


BACKENDS = [
    "memory",
    "sqlite",
    "sqlite-encrypted",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("postgres-encrypted", marks=pytest.mark.postgres),
]


class Stores:
    """Opens stores of one backend over one database (memory: one shared instance)."""

    def __init__(self, backend: str, path: Path, dsn: str, schema: str) -> None:
        self.backend = backend
        self.path = path
        self.dsn = dsn
        self.schema = schema
        self.opened: list[Store] = []
        self.memory: MemoryStore | None = None

    def open(self) -> Store:
        if self.backend == "memory":
            if self.memory is None:
                self.memory = MemoryStore()
            return self.memory
        extra: dict[str, Any] = {"keyring": KEYRING} if self.backend.endswith("-encrypted") else {}
        store: Store
        if self.backend.startswith("sqlite"):
            store = SQLiteStore(self.path, **extra)
        else:
            store = PostgresStore(self.dsn, schema=self.schema, **extra)
        self.opened.append(store)
        return store


@pytest.fixture(params=BACKENDS)
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    backend = str(request.param)
    dsn = request.getfixturevalue("pg_dsn") if backend.startswith("postgres") else ""
    schema = request.getfixturevalue("pg_schema") if backend.startswith("postgres") else ""
    opened = Stores(backend, tmp_path / "tether.db", dsn, schema)
    yield opened
    for store in opened.opened:
        await store.close()


@pytest.fixture
def store(stores: Stores) -> Store:
    return stores.open()
