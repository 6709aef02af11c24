"""Service fixtures: a database per test (a SQLite file, or a PostgreSQL schema dropped after)
and ``tether serve`` subprocesses that are always stopped."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from tests.serve._serve_support import Database, Server

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    dsn = os.environ.get("TETHER_TEST_POSTGRES_DSN", DEFAULT_DSN)
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL at {dsn} is required in CI and unreachable: {exc}")
        pytest.skip(f"PostgreSQL at {dsn} is unreachable: {exc}")
    return dsn


def pg_database(dsn: str) -> Iterator[Database]:
    schema = f"tether_serve_{uuid.uuid4().hex[:12]}"
    yield Database("postgres", dsn=dsn, schema=schema)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """The service's database, on each backend."""
    if request.param == "sqlite":
        yield Database("sqlite", path=tmp_path / "serve.db")
        return
    yield from pg_database(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def pg_db(pg_dsn: str) -> Iterator[Database]:
    """A PostgreSQL database (several processes share it)."""
    yield from pg_database(pg_dsn)


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    """The file the scripted side-effect tools append a line to each time they run."""
    path = tmp_path / "effects.txt"
    path.touch()
    return path


@pytest.fixture
def servers(tmp_path: Path, effects: Path) -> Iterator[Callable[..., Server]]:
    """Start ``tether serve`` processes; every one is stopped at teardown."""
    started: list[Server] = []

    def start(db: Database, **kwargs: Any) -> Server:
        extra_env = {"TETHER_TEST_EFFECTS": str(effects), **kwargs.pop("extra_env", {})}
        server = Server(db, extra_env=extra_env, **kwargs)
        started.append(server)
        return server.start(tmp_path)

    yield start
    for server in started:
        server.stop()
