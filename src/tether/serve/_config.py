"""``ServeConfig``: everything ``tether serve`` is started with (JSON-serializable, so worker
processes started by uvicorn get the same configuration through the environment)."""

from __future__ import annotations

import ipaddress

import msgspec

from tether.errors import UserError
from tether.history import SanitizeLimits

__all__ = ["CONFIG_ENV", "ServeConfig", "is_loopback"]

CONFIG_ENV = "TETHER_SERVE_CONFIG"
"""The environment variable a worker process reads its configuration from."""


class ServeConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How a service process runs.

    ``db`` (a SQLite file) or ``postgres`` (a DSN, optionally with ``postgres_schema``) holds the
    conversations, the run events and the users. ``model`` and ``tools`` are specs as
    ``tether serve --model/--tools`` take them. ``auth=False`` is allowed on loopback binds only.
    The ``max_*`` limits bound untrusted history (``SanitizeLimits``); ``max_body_bytes`` bounds
    every request body; ``max_active_runs`` bounds a user's running or paused runs (429 past it).
    ``mcp`` names MCP servers (commands or URLs, ``mcp_headers`` for the URLs) whose tools the
    agent uses.
    """

    db: str | None = None
    postgres: str | None = None
    postgres_schema: str | None = None
    model: str | None = None
    tools: str | None = None
    instructions: str | None = None
    host: str = "127.0.0.1"
    port: int = 8321
    auth: bool = True
    max_messages: int = 2_000
    max_total_bytes: int = 8 * 1024 * 1024
    max_part_bytes: int = 1024 * 1024
    max_inline_media_bytes: int = 4 * 1024 * 1024
    max_body_bytes: int = 24 * 1024 * 1024
    ping_interval: float = 15.0
    heartbeat_interval: float = 1.0
    stale_after: float = 15.0
    poll_interval: float = 0.05
    approval_ttl: float = 24 * 3600.0
    max_active_runs: int = 16
    max_open_streams: int = 32
    compaction: bool = True
    notify: str = "listen"
    mcp: tuple[str, ...] = ()
    mcp_headers: tuple[str, ...] = ()
    drain_timeout: float = 0.0
    """Seconds a stopping process lets its runs finish (new connections are refused meanwhile)."""
    durable: bool = False
    """Runs are DBOS workflows (``tether[durable]``): a run whose process dies, or that is still
    going when a stopping process's drain ends, is continued by a live process (or the next
    start) instead of closed as interrupted. One durable service per process. ``tether serve``
    turns it on by default."""

    def __post_init__(self) -> None:
        if (self.db is None) == (self.postgres is None):
            raise UserError("ServeConfig needs exactly one of db= (SQLite file) or postgres= (DSN)")
        if self.notify not in ("listen", "poll"):
            raise UserError(f"notify must be 'listen' or 'poll', not {self.notify!r}")

    @property
    def limits(self) -> SanitizeLimits:
        return SanitizeLimits(
            max_messages=self.max_messages,
            max_total_bytes=self.max_total_bytes,
            max_part_bytes=self.max_part_bytes,
            max_inline_media_bytes=self.max_inline_media_bytes,
        )

    def to_json(self) -> bytes:
        return msgspec.json.encode(self)

    @classmethod
    def from_json(cls, data: str | bytes) -> ServeConfig:
        return msgspec.json.decode(data, type=cls)


def is_loopback(host: str) -> bool:
    """True for a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
