"""``TetherSession``: the OpenAI Agents SDK's ``Session`` protocol over a tether ``Store``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from tether.errors import ConflictError, MissingExtra, NotFound, UserError

try:
    from agents.memory import SessionSettings
    from agents.memory.session_settings import coerce_session_settings
except ModuleNotFoundError as exc:
    if exc.name is None or exc.name.partition(".")[0] != "agents":
        raise  # the SDK is installed but one of its own dependencies is missing: not our extra
    raise MissingExtra("the OpenAI Agents SDK session", "openai-agents", "openai-agents") from exc

from tether.integrations.openai_agents._items import (
    Item,
    call_names,
    decode_items,
    encode_message,
    marker,
    marker_op,
    name_results,
    summary,
    unkept,
    unnamed_calls,
)
from tether.messages import Message

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

    from tether.stores import Store

__all__ = ["LOGGER_NAME", "TetherSession"]

LOGGER_NAME = "tether.integrations.openai_agents"
"""The logger that receives what a conversion could not carry (WARNING)."""

_log = logging.getLogger(LOGGER_NAME)

_POP_ATTEMPTS = 16
"""How often ``pop_item`` re-reads the tail when another writer appended in between."""
_FIRST_WINDOW = 256
"""Messages read first from the end of the log when every item is asked for; then x4 each time."""
_MIN_WINDOW = 64
"""Messages read first for ``limit`` items: at least this many, else twice the limit."""
_MAX_WINDOW = 2**62
"""A window never asks the store for more (its paging arguments stop at 2^63 - 1)."""


def _check_text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise UserError(f"{name} must be a string, not {type(value).__name__}")
    if not value or len(value) > 512 or "\x00" in value:
        raise UserError(f"{name} must be 1 to 512 characters without NUL")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"{name} holds a lone surrogate (not valid Unicode)") from None
    return str(value)


def _settings(value: object) -> SessionSettings:
    if not isinstance(value, SessionSettings | dict):
        raise UserError(f"session_settings must be a SessionSettings or a dict, not {type(value).__name__}")
    try:
        settings = coerce_session_settings(cast("SessionSettings | dict[str, Any]", value))
    except Exception as exc:  # the SDK's validation error (pydantic), whatever its class
        raise UserError(f"session_settings: {exc}") from None
    _check_limit(settings.limit)
    return settings


def _check_limit(limit: object) -> int | None:
    if limit is None:
        return None
    if type(limit) is not int or limit < 0:
        raise UserError(f"limit must be None or an int >= 0, not {limit!r}")
    return limit


class TetherSession:
    """An OpenAI Agents SDK session kept in a tether ``Store``.

    ``session_id`` is the id of the tether conversation that holds the session, in ``owner``'s
    scope: another owner using the same ``session_id`` has a session of its own and never sees
    these items (the store answers as if the conversation did not exist). The conversation is
    created on the first ``add_items``. ``session_settings.limit`` is the default of
    ``get_items(limit=)``, as in the SDK's own sessions.

    The store is the caller's: the session never closes it. Several sessions (processes, servers)
    may use one conversation at once: every ``add_items`` lands whole, ``pop_item`` removes an item
    no other ``pop_item`` removed (optimistic concurrency on the store's version).
    """

    def __init__(
        self,
        session_id: str,
        store: Store,
        *,
        owner: str,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.session_id = _check_text(session_id, "session_id")
        self.owner = _check_text(owner, "owner")
        self.session_settings: SessionSettings | None = (
            SessionSettings() if session_settings is None else _settings(session_settings)
        )
        self.store = store
        self._reported: set[int] = set()  # seqs whose encoding losses were logged already

    def __repr__(self) -> str:
        return f"TetherSession({self.session_id!r}, owner={self.owner!r})"

    # -- the Session protocol -------------------------------------------------------------------
    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit`` (or ``session_settings.limit``) only
        the latest ``limit`` of them. A session nothing was added to has none."""
        want = _check_limit(limit)
        if want is None and self.session_settings is not None:
            want = _check_limit(self.session_settings.limit)
        if want == 0:
            return []
        items, _ = await self._tail(want)
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items as tether messages, in one atomic store append. Items the conversion
        cannot carry exactly are logged (WARNING on ``tether.integrations.openai_agents``);
        malformed items raise ``DecodeError`` naming the item, and nothing is written."""
        given = cast(object, items)
        if not isinstance(given, list):
            raise UserError(f"add_items takes a list of items, not {type(given).__name__}")
        if not items:
            return
        messages, report, plain = decode_items(items)
        unnamed = unnamed_calls(report, plain)
        if unnamed:  # results whose call an earlier add_items stored
            messages, report = name_results(
                messages, report, unnamed, await self._call_names(set(unnamed.values()))
            )
        lines = [summary(report.losses, unit="item")] if report.losses else []
        lines += unkept(plain, report, messages)
        if lines:
            _log.warning(
                "session %r (owner %r): add_items of %d items could not carry everything exactly: %s",
                self.session_id,
                self.owner,
                len(items),
                "; ".join(lines),
            )
        if messages:
            await self._append(messages)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the latest item and return it (``None`` when the session has none).

        The log is append-only: a marker is appended, checked against the version the item was
        read at, so two concurrent pops remove two different items."""
        for attempt in range(_POP_ATTEMPTS):
            items, version = await self._tail(1)
            if not items:
                return None
            try:
                await self.store.append(
                    self.owner, self.session_id, [marker("pop_item", items[-1])], expected_version=version
                )
            except ConflictError:
                if attempt == _POP_ATTEMPTS - 1:
                    raise
                continue
            return cast("TResponseInputItem", items[-1])
        return None  # pragma: no cover - the loop returns or raises

    async def clear_session(self) -> None:
        """Remove every item: a marker is appended (the log keeps what was said). A session with
        no items is left as it is."""
        items, _ = await self._tail(1)
        if items:
            await self.store.append(self.owner, self.session_id, [marker("clear_session")])

    # -- internals ------------------------------------------------------------------------------
    async def _append(self, messages: list[Message]) -> None:
        try:
            await self.store.append(self.owner, self.session_id, messages)
        except NotFound:
            await self.store.create(self.owner, self.session_id, exist_ok=True)
            await self.store.append(self.owner, self.session_id, messages)

    async def _call_names(self, wanted: set[str]) -> dict[str, str]:
        """The names of the calls ``wanted``, from the end of the log (the whole log only when
        the last ``_MIN_WINDOW`` messages do not hold them all)."""
        names: dict[str, str] = {}
        for tail in (_MIN_WINDOW, None):
            try:
                loaded = await self.store.load(self.owner, self.session_id, tail=tail)
            except NotFound:
                return {}
            names = call_names(loaded.messages)
            if wanted <= names.keys() or loaded.offset == 0:
                break
        return names

    async def _tail(self, want: int | None) -> tuple[list[Item], int]:
        """The last ``want`` items in view (all of them for ``None``), oldest first, and the
        version they were read at (-1: no conversation). Reads the log backwards in growing
        windows and stops at a clear marker, so a cleared session never reads what came before."""
        window = _FIRST_WINDOW if want is None else min(max(_MIN_WINDOW, 2 * want), _MAX_WINDOW)
        try:
            loaded = await self.store.load(self.owner, self.session_id, tail=window)
        except NotFound:
            return [], -1
        version = loaded.version
        messages, offset = loaded.messages, loaded.offset
        newest_first: list[Item] = []
        skip = 0  # pop markers not yet matched with the item they removed
        while True:
            for index in range(len(messages) - 1, -1, -1):
                message = messages[index]
                op = marker_op(message)
                if op == "clear_session":
                    return newest_first[::-1], version
                if op == "pop_item":
                    skip += 1
                    continue
                for item in reversed(self._encode(message, offset + index + 1)):
                    if skip:
                        skip -= 1
                        continue
                    newest_first.append(item)
                    if want is not None and len(newest_first) >= want:
                        return newest_first[::-1], version
            if offset == 0:
                return newest_first[::-1], version
            window = min(window * 4, _MAX_WINDOW)
            start = max(0, offset - window)
            try:
                older = await self.store.load(self.owner, self.session_id, since=start)
            except NotFound:  # deleted while it was read
                return [], -1
            messages, offset = older.messages[: offset - start], start

    def _encode(self, message: Message, seq: int) -> list[Item]:
        items, report = encode_message(message)
        if report.losses and seq not in self._reported:
            self._reported.add(seq)
            _log.warning(
                "session %r (owner %r): stored message %d could not be carried exactly as items: %s",
                self.session_id,
                self.owner,
                seq,
                summary(report.losses, unit=None),
            )
        return items
