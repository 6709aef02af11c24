"""``tether runs …``: the runs of ``tether serve`` (its run records), for operators: list, show,
cancel — one owner at a time, as every other operation of the service."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from tether.cli._common import fail, json_option, out_console, print_json
from tether.cli._serve import PostgresOpt, SchemaOpt, database
from tether.cli._store import DEFAULT_OWNER, DbOpt, OwnerOpt
from tether.errors import NotFound
from tether.serve import RunLog, open_run_log

__all__ = ["runs_app"]

runs_app = typer.Typer(
    help="List, show and cancel the runs of tether serve (one owner's), and list its processes.",
    no_args_is_help=True,
)
T = TypeVar("T")
RunArg = Annotated[str, typer.Argument(help="The run id.", show_default=False)]
JsonOpt = Annotated[bool, json_option("Print JSON for programs.")]
STATUSES = ("running", "paused", "completed", "failed", "canceled", "interrupted")


def _on_log(
    db: Path | None, postgres: str | None, schema: str | None, op: Callable[[RunLog], Awaitable[T]]
) -> T:
    path, dsn = database(db, postgres, create=False)

    async def run() -> T:
        async with open_run_log(db=path, postgres=dsn, schema=schema) as log:
            return await op(log)

    try:
        return asyncio.run(run())
    except NotFound as exc:
        fail(str(exc), cause=exc)


def _row(record: Any) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "conversation_id": record.conversation_id,
        "status": record.status,
        "created_at": record.created_at.isoformat(timespec="seconds"),
        "updated_at": record.updated_at.isoformat(timespec="seconds"),
        "events": record.last_seq,
        "process_id": record.process_id,
        "pause_id": record.pause_id,
    }


@runs_app.command("list")
def list_runs(
    db: DbOpt = None,
    postgres: PostgresOpt = None,
    postgres_schema: SchemaOpt = None,
    owner: OwnerOpt = DEFAULT_OWNER,
    status: Annotated[
        str | None, typer.Option("--status", help=f"Only runs in this status ({', '.join(STATUSES)}).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most N runs.", min=1)] = 20,
    as_json: JsonOpt = False,
) -> None:
    """List the owner's runs, newest first: status, conversation, events, holding process."""
    if status is not None and status not in STATUSES:
        fail(f"--status must be one of {', '.join(STATUSES)}, not {status!r}")
    records = _on_log(db, postgres, postgres_schema, lambda log: log.list(owner, status=status, limit=limit))
    rows = [_row(r) for r in records]
    if as_json:
        print_json(rows)
        return
    console = out_console()
    if not rows:
        console.print("no runs")
        return
    table = Table("run", "status", "conversation", "events", "updated (UTC)")
    for r in rows:
        table.add_row(r["run_id"], r["status"], r["conversation_id"], str(r["events"]), r["updated_at"])
    console.print(table)


@runs_app.command("show")
def show_run(
    run_id: RunArg,
    db: DbOpt = None,
    postgres: PostgresOpt = None,
    postgres_schema: SchemaOpt = None,
    owner: OwnerOpt = DEFAULT_OWNER,
    as_json: JsonOpt = False,
) -> None:
    """Show one run: its record and its events, one line each (seq and type)."""
    record, events = _on_log(db, postgres, postgres_schema, lambda log: log.show(owner, run_id))
    kinds = [(e.seq, json.loads(e.data).get("type", "?")) for e in events]
    if as_json:
        print_json({**_row(record), "event_types": [{"seq": s, "type": t} for s, t in kinds]})
        return
    console = out_console()
    for key, value in _row(record).items():
        console.print(f"[bold]{key}[/]: {escape(str(value))}")
    for seq, kind in kinds:
        console.print(f"  {seq:>4} {escape(kind)}")


@runs_app.command("cancel")
def cancel_run(
    run_id: RunArg,
    db: DbOpt = None,
    postgres: PostgresOpt = None,
    postgres_schema: SchemaOpt = None,
    owner: OwnerOpt = DEFAULT_OWNER,
    wait: Annotated[
        float, typer.Option("--wait", help="Seconds to wait for a running run to stop.", min=0)
    ] = 10.0,
) -> None:
    """Cancel a run: a paused one at once, a running one through the process running it."""
    record = _on_log(db, postgres, postgres_schema, lambda log: log.cancel(owner, run_id, wait=wait))
    console = out_console()
    if record.status == "running":
        console.print(f"run {run_id}: cancel requested; still running after {wait:g} s")
        raise typer.Exit(1)
    console.print(f"run {run_id}: {record.status}")


@runs_app.command("processes")
def list_processes(
    db: DbOpt = None,
    postgres: PostgresOpt = None,
    postgres_schema: SchemaOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the service's processes: host, pid, seconds since their last heartbeat (a dead one's
    runs move to a live one within about a second on its host, 15 s elsewhere) and runs held."""
    found = _on_log(db, postgres, postgres_schema, lambda log: log.processes())
    now = time.time()
    rows = [
        {
            "process_id": p.process_id,
            "host": p.host,
            "pid": p.pid,
            "heartbeat_age": round(now - p.heartbeat_at, 1),
            "running_runs": held,
        }
        for p, held in found
    ]
    if as_json:
        print_json(rows)
        return
    console = out_console()
    if not rows:
        console.print("no processes")
        return
    table = Table("process", "host", "pid", "heartbeat (s ago)", "running runs")
    table.columns[0].overflow = "fold"  # an id the operator copies: folded, never cut
    for r in rows:
        table.add_row(*(str(r[k]) for k in ("process_id", "host", "pid", "heartbeat_age", "running_runs")))
    console.print(table)
