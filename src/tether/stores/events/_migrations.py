"""Named migrations of the service's tables (runs, events, processes, users, tokens, secrets).

A separate list from the store's (``_migrations.py``) in the same ``tether_migrations`` table,
every name prefixed ``serve_``: a database used only by ``tether chat`` never gets these tables,
and the store ignores their names. Append-only, like the store's list.
"""

from __future__ import annotations

__all__ = ["FAMILY", "POSTGRES", "SQLITE"]

FAMILY = "serve_"


def _tables(real: str, blob: str, bigint: str) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE tether_serve_runs (
            run_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at {real} NOT NULL,
            updated_at {real} NOT NULL,
            last_seq {bigint} NOT NULL DEFAULT 0,
            process_id TEXT,
            pause_id TEXT,
            pause {blob},
            cancel_requested_at {real}
        )""",
        # at most one active run per conversation, enforced by the database across processes
        "CREATE UNIQUE INDEX tether_serve_runs_active ON tether_serve_runs (owner, conversation_id) "
        "WHERE status IN ('running', 'paused')",
        "CREATE INDEX tether_serve_runs_conversation "
        "ON tether_serve_runs (owner, conversation_id, created_at)",
        "CREATE INDEX tether_serve_runs_status ON tether_serve_runs (status)",
        f"""CREATE TABLE tether_serve_events (
            run_id TEXT NOT NULL,
            seq {bigint} NOT NULL,
            created_at {real} NOT NULL,
            data {blob} NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        f"""CREATE TABLE tether_serve_processes (
            process_id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid {bigint} NOT NULL,
            started_at {real} NOT NULL,
            heartbeat_at {real} NOT NULL
        )""",
        f"""CREATE TABLE tether_serve_users (
            name TEXT PRIMARY KEY,
            created_at {real} NOT NULL,
            revoked_at {real}
        )""",
        f"""CREATE TABLE tether_serve_tokens (
            digest TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            created_at {real} NOT NULL,
            revoked_at {real}
        )""",
        f"""CREATE TABLE tether_serve_secrets (
            name TEXT PRIMARY KEY,
            value {blob} NOT NULL
        )""",
    )


def _deleted(real: str) -> tuple[str, ...]:
    # conversations whose runs were deleted with them: no run starts on them again
    return (
        f"""CREATE TABLE tether_serve_deleted (
            owner TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            deleted_at {real} NOT NULL,
            PRIMARY KEY (owner, conversation_id)
        )""",
    )


SQLITE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("serve_0001_runs_events_users", _tables("REAL", "BLOB", "INTEGER")),
    ("serve_0002_deleted_conversations", _deleted("REAL")),
)

POSTGRES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("serve_0001_runs_events_users", _tables("DOUBLE PRECISION", "BYTEA", "BIGINT")),
    ("serve_0002_deleted_conversations", _deleted("DOUBLE PRECISION")),
)
