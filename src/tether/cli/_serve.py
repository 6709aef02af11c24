"""``tether serve``: the HTTP service, and ``tether serve users …`` to manage its API tokens."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit

import typer

import tether.serve
from tether.cli._common import err_console, fail, out_console
from tether.cli._mcp_tools import McpHeaderOpt, McpOpt, mcp_toolsets
from tether.cli._store import DbOpt, default_db_path
from tether.errors import TetherError
from tether.serve import CONFIG_ENV, WORKER_APP, ServeConfig, is_loopback, load_model, open_user_store

__all__ = ["PostgresOpt", "SchemaOpt", "database", "describe_dsn", "serve_app"]

serve_app = typer.Typer(
    help="Run the tether HTTP service (pip install 'tether[serve]'); manage its users with "
    "'tether serve users'.",
    invoke_without_command=True,
)
users_app = typer.Typer(help="Users and API tokens of the service.", no_args_is_help=True)
serve_app.add_typer(users_app, name="users")

PostgresOpt = Annotated[
    str | None,
    typer.Option(
        "--postgres",
        envvar="TETHER_POSTGRES",
        help="PostgreSQL DSN: share one database between several service processes (env TETHER_POSTGRES).",
        show_default=False,
    ),
]
SchemaOpt = Annotated[
    str | None,
    typer.Option(
        "--postgres-schema", help="PostgreSQL schema for the tables (default: the search path).", hidden=True
    ),
]


_DSN_FIELD = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def describe_dsn(dsn: str) -> str:
    """Where a PostgreSQL DSN points (``host:port/dbname``), never its credentials or options:
    the start line goes to logs."""
    if "://" in dsn:
        parts = urlsplit(dsn)
        try:
            port = parts.port
        except ValueError:
            port = None
        host, db = parts.hostname or "", parts.path.lstrip("/")
    else:
        fields = {k.lower(): v.strip("'") for k, v in _DSN_FIELD.findall(dsn)}
        host, db = fields.get("host", fields.get("hostaddr", "")), fields.get("dbname", "")
        port = fields.get("port")
    where = (host or "localhost") + (f":{port}" if port else "")
    return f"{where}/{db}" if db else where


def database(db: Path | None, postgres: str | None, *, create: bool = True) -> tuple[str | None, str | None]:
    """The SQLite path or PostgreSQL DSN the options name; ``create=False``: a missing file is an
    error (reading commands), not a new database."""
    if not create and postgres is None:
        path = db if db is not None else default_db_path()
        if not path.is_file():
            fail(f"no service database at {path}")
    return _database(db, postgres)


def _database(db: Path | None, postgres: str | None) -> tuple[str | None, str | None]:
    if db is not None and postgres is not None:
        fail("give either --db or --postgres, not both")
    if postgres is not None:
        return None, postgres
    path = db if db is not None else default_db_path()
    if path.is_dir():
        fail(f"database path {path} is a directory")
    if db is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.parent.is_dir():
        fail(f"cannot create database {path}: directory {path.parent} does not exist")
    return str(path), None


T = TypeVar("T")


def _on_users(
    db: Path | None, postgres: str | None, schema: str | None, op: Callable[[Any], Awaitable[T]]
) -> T:
    """Open the user store the options name, run ``op`` on it, close it: one command's work."""

    path, dsn = _database(db, postgres)

    async def run() -> T:
        async with open_user_store(db=path, postgres=dsn, schema=schema) as users:
            return await op(users)

    return asyncio.run(run())


ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="provider:model, 'local' (the default: the bundled model), or py:package.module:factory.",
        show_default=False,
    ),
]
HostOpt = Annotated[str, typer.Option("--host", help="Address to bind.")]
PortOpt = Annotated[int, typer.Option("--port", help="Port to bind.", min=0, max=65535)]
WorkersOpt = Annotated[int, typer.Option("--workers", help="Worker processes.", min=1, max=64)]
InstructionsOpt = Annotated[
    str | None,
    typer.Option("--instructions", help="System instructions of the agent.", show_default=False),
]
ToolsOpt = Annotated[
    str | None,
    typer.Option(
        "--tools", help="'demo' (time and calculator) or py:package.module:name.", show_default=False
    ),
]
NoAuthOpt = Annotated[
    bool,
    typer.Option("--no-auth", help="No tokens: every request is owner 'local' (loopback binds only)."),
]
ActiveRunsOpt = Annotated[
    int,
    typer.Option(
        "--max-active-runs", help="Running or paused runs one user may have at once (0: no limit).", min=0
    ),
]
OpenStreamsOpt = Annotated[
    int,
    typer.Option(
        "--max-open-streams",
        help="Event streams one user may hold open on each server process (0: no limit).",
        min=0,
    ),
]
CompactionOpt = Annotated[
    bool,
    typer.Option(
        "--compaction/--no-compaction",
        help="Compact long conversations at 80% of the model's context window (as tether chat does).",
    ),
]
PingOpt = Annotated[
    float,
    typer.Option(
        "--ping-interval",
        help="Seconds between keep-alives of an idle event stream (open streams re-check their token).",
        min=0.05,
        max=30,  # the web page counts 40 s of silence as a dropped connection
    ),
]
NotifyOpt = Annotated[
    str,
    typer.Option("--notify", help="PostgreSQL live events: listen (LISTEN/NOTIFY) or poll.", hidden=True),
]
DrainOpt = Annotated[
    float,
    typer.Option(
        "--drain-timeout",
        help="On stop (SIGTERM, Ctrl-C): seconds runs still going may take to finish before they "
        "are handed on (continued by another process or the next start; with --no-durable: closed "
        "as interrupted).",
        min=0,
    ),
]
DurableOpt = Annotated[
    bool,
    typer.Option(
        "--durable/--no-durable",
        help="Runs outlive their process (DBOS workflows): a run whose process dies, or is still "
        "going after the drain, is continued by another process on the same database or by the "
        "next start. --no-durable closes such runs as interrupted.",
    ),
]


@serve_app.callback()
def serve(
    ctx: typer.Context,
    model: ModelOpt = None,
    db: DbOpt = None,
    postgres: PostgresOpt = None,
    postgres_schema: SchemaOpt = None,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8321,
    workers: WorkersOpt = 1,
    instructions: InstructionsOpt = None,
    tools: ToolsOpt = None,
    no_auth: NoAuthOpt = False,
    max_active_runs: ActiveRunsOpt = 16,
    max_open_streams: OpenStreamsOpt = 32,
    compaction: CompactionOpt = True,
    ping_interval: PingOpt = 15.0,
    notify: NotifyOpt = "listen",
    mcp: McpOpt = None,
    mcp_header: McpHeaderOpt = None,
    drain_timeout: DrainOpt = 0.0,
    durable: DurableOpt = True,
) -> None:
    """Start the service (Ctrl-C stops it; runs still going after --drain-timeout are continued
    by another process or the next start)."""
    if ctx.invoked_subcommand is not None:
        return
    run, create_app = _server()
    if no_auth and not is_loopback(host):
        fail(f"--no-auth is allowed only on a loopback bind (127.0.0.1, ::1, localhost), not {host!r}")
    path, dsn = _database(db, postgres)
    try:
        config = ServeConfig(
            db=path,
            postgres=dsn,
            postgres_schema=postgres_schema,
            model=model,
            tools=tools,
            instructions=instructions,
            host=host,
            port=port,
            auth=not no_auth,
            notify=notify,
            max_active_runs=max_active_runs,
            ping_interval=ping_interval,
            max_open_streams=max_open_streams,
            compaction=compaction,
            drain_timeout=drain_timeout,
            durable=durable,
            mcp=tuple(mcp or ()),
            mcp_headers=tuple(mcp_header or ()),
        )
        mcp_toolsets(mcp, mcp_header)  # a bad --mcp or a missing extra fails here, before binding
        loaded = load_model(model)  # fail here, once, rather than in every worker
    except TetherError as exc:
        fail(str(exc), cause=exc)
    _announce(config, workers)
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": os.environ.get("TETHER_SERVE_LOG_LEVEL", "info"),
        "timeout_graceful_shutdown": 3,
        "server_header": False,
    }
    if workers == 1:
        run(create_app(config, model=loaded), **options)
    else:
        os.environ[CONFIG_ENV] = config.to_json().decode()
        run(WORKER_APP, factory=True, workers=workers, **options)


def _server() -> tuple[Callable[..., None], Callable[..., Any]]:
    """uvicorn's ``run`` and ``create_app``, or the error naming the serve extra."""
    try:
        import uvicorn

        return uvicorn.run, tether.serve.create_app
    except ImportError as exc:
        fail(f"tether serve needs its extra: pip install 'tether[serve]' ({exc})", cause=exc)


def _announce(config: ServeConfig, workers: int) -> None:
    console = err_console()
    dsn, path = config.postgres, config.db
    where = f"PostgreSQL {describe_dsn(dsn)}" if dsn else f"SQLite {path}"
    console.print(
        f"tether serve: http://{config.host}:{config.port} ({where}; model {config.model or 'local'}; "
        f"workers {workers}; {'durable runs' if config.durable else 'runs end with their process'})"
    )
    if not config.auth:
        console.print(
            "[bold yellow]WARNING: --no-auth: requests are not authenticated; every one acts as owner "
            "'local'. Allowed on a loopback bind only.[/]"
        )


@users_app.command("add")
def add_user(
    name: Annotated[str, typer.Argument(help="The user's name (the owner of its conversations).")],
    db: DbOpt = None,
    postgres: PostgresOpt = None,
    postgres_schema: SchemaOpt = None,
) -> None:
    """Create a user and print its API token (shown only this once; stored hashed)."""
    typer.echo(_on_users(db, postgres, postgres_schema, lambda users: users.add_user(name)))


@users_app.command("token")
def add_token(
    name: Annotated[str, typer.Argument(help="An existing user.")],
    db: DbOpt = None,
    postgres: PostgresOpt = None,
    postgres_schema: SchemaOpt = None,
) -> None:
    """Print a new, additional API token for a user."""
    typer.echo(_on_users(db, postgres, postgres_schema, lambda users: users.add_token(name)))


@users_app.command("revoke")
def revoke_user(
    name: Annotated[str, typer.Argument(help="The user to revoke.")],
    db: DbOpt = None,
    postgres: PostgresOpt = None,
    postgres_schema: SchemaOpt = None,
) -> None:
    """Revoke a user and every token of it (their requests get 401 from now on)."""
    _on_users(db, postgres, postgres_schema, lambda users: users.revoke_user(name))
    out_console().print(f"revoked {name}")


@users_app.command("list")
def list_users(
    db: DbOpt = None,
    postgres: PostgresOpt = None,
    postgres_schema: SchemaOpt = None,
) -> None:
    """List users: name, created, revoked, active tokens."""
    console = out_console()
    for user in _on_users(db, postgres, postgres_schema, lambda users: users.users()):
        state = f"revoked {user.revoked_at:%Y-%m-%d %H:%M}" if user.revoked_at else f"{user.tokens} token(s)"
        console.print(f"{user.name}\tcreated {user.created_at:%Y-%m-%d %H:%M}\t{state}")
