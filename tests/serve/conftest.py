"""Service fixtures: a database per test (a SQLite file, or a PostgreSQL schema dropped after)
and ``tether serve`` subprocesses that are always stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.serve._serve_support import Database, Server


def pg_database(request: pytest.FixtureRequest) -> Database:
    """A PostgreSQL database of this test: its own schema (``pg_schema``, dropped after)."""
    return Database(
        "postgres", dsn=request.getfixturevalue("pg_dsn"), schema=request.getfixturevalue("pg_schema")
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    """The service's database, on each backend."""
    if request.param == "sqlite":
        return Database("sqlite", path=tmp_path / "serve.db")
    return pg_database(request)


@pytest.fixture
def pg_db(request: pytest.FixtureRequest) -> Database:
    """A PostgreSQL database (several processes share it)."""
    return pg_database(request)


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
