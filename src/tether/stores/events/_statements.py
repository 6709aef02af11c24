"""The statements of the runs, events and secrets tables that SQLite and PostgreSQL run alike,
written with ``?`` placeholders (PostgreSQL's modules swap them for ``%s``: ``qmark``). A backend
appends its own locking clause where it needs one (``FOR UPDATE``)."""

from __future__ import annotations

__all__ = [
    "ACTIVE_COUNT",
    "ACTIVE_RUN",
    "ACTIVE_SQL",
    "CONVERSATION_RUNS",
    "EVENTS_AFTER",
    "INSERT_DELETED",
    "INSERT_EVENT",
    "INSERT_FIRST_EVENT",
    "INSERT_RUN",
    "INSERT_SECRET",
    "IS_DELETED",
    "OWNED_RUN",
    "OWNS_RUN",
    "REQUEST_CANCEL",
    "RUN",
    "RUN_COLUMNS",
    "SECRET",
    "TAKE_OVER",
]

RUN_COLUMNS = (
    "run_id, owner, conversation_id, status, created_at, updated_at, last_seq, process_id, pause_id, pause"
)
ACTIVE_SQL = "('running', 'paused')"
"""The statuses of ``ACTIVE``, as SQL."""
RUN = f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE run_id = ?"
OWNED_RUN = f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE run_id = ? AND owner = ?"
OWNS_RUN = "SELECT 1 FROM tether_serve_runs WHERE run_id = ? AND owner = ?"
ACTIVE_RUN = (
    f"SELECT run_id FROM tether_serve_runs WHERE owner = ? AND conversation_id = ? AND status IN {ACTIVE_SQL}"
)
ACTIVE_COUNT = f"SELECT COUNT(*) FROM tether_serve_runs WHERE owner = ? AND status IN {ACTIVE_SQL}"
IS_DELETED = "SELECT 1 FROM tether_serve_deleted WHERE owner = ? AND conversation_id = ?"
INSERT_DELETED = (
    "INSERT INTO tether_serve_deleted (owner, conversation_id, deleted_at) VALUES (?, ?, ?) "
    "ON CONFLICT (owner, conversation_id) DO NOTHING"
)
CONVERSATION_RUNS = "SELECT run_id, status FROM tether_serve_runs WHERE owner = ? AND conversation_id = ?"
INSERT_RUN = (
    f"INSERT INTO tether_serve_runs ({RUN_COLUMNS}) VALUES (?, ?, ?, 'running', ?, ?, 1, ?, NULL, NULL)"
)
INSERT_FIRST_EVENT = "INSERT INTO tether_serve_events (run_id, seq, created_at, data) VALUES (?, 1, ?, ?)"
INSERT_EVENT = "INSERT INTO tether_serve_events (run_id, seq, created_at, data) VALUES (?, ?, ?, ?)"
EVENTS_AFTER = "SELECT seq, data FROM tether_serve_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
TAKE_OVER = (
    "UPDATE tether_serve_runs SET status = ?, process_id = ?, pause_id = NULL, pause = NULL, "
    "cancel_requested_at = NULL, last_seq = ?, updated_at = ? WHERE run_id = ?"
)
REQUEST_CANCEL = (
    "UPDATE tether_serve_runs SET cancel_requested_at = ? WHERE run_id = ? AND owner = ? "
    "AND status = 'running' AND cancel_requested_at IS NULL"
)
INSERT_SECRET = "INSERT INTO tether_serve_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
SECRET = "SELECT value FROM tether_serve_secrets WHERE name = ?"
