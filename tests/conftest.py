"""Shared fixtures. Hypothesis profiles: ``ci`` (default; derandomized when CI is set) and
``nightly`` (HYPOTHESIS_PROFILE=nightly: many more random examples)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "nightly", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT.parent / "shared" / "provider-samples"


@pytest.fixture(scope="session")
def provider_samples() -> Path:
    """The recorded provider traffic folder. Missing: skip visibly; in CI a missing folder fails."""
    if not SAMPLES.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"provider samples folder {SAMPLES} is missing (required in CI)")
        pytest.skip(f"provider samples folder {SAMPLES} is missing")
    return SAMPLES


POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
"""The test server, unless ``TETHER_TEST_POSTGRES_DSN`` names another."""


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The PostgreSQL DSN (``TETHER_TEST_POSTGRES_DSN``). In CI an unreachable server fails;
    elsewhere it skips with the reason."""
    import psycopg  # the postgres extra: only tests that use the server need it

    dsn = os.environ.get("TETHER_TEST_POSTGRES_DSN", POSTGRES_DSN)
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL at {dsn} is required in CI and unreachable: {exc}")
        pytest.skip(f"PostgreSQL at {dsn} is unreachable: {exc}")
    return dsn


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema name for this test; dropped (with everything in it) afterwards."""
    import psycopg
    from psycopg import sql

    name = f"tether_test_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for schema in (name, f"{name}_dbos"):  # a durable service keeps DBOS's tables beside its own
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
