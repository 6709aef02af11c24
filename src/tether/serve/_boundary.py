"""The boundary every chat protocol endpoint shares (AG-UI, the AI SDK's chat stream): a
thread named by the client is one of the caller's conversations; the messages a client holds are
untrusted, so a new thread is seeded with them only after ``sanitize_history``, and a thread the
server holds keeps the server's history. What was done is reported in the client's own positions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from tether.errors import NotFound
from tether.history import CallRef, SanitizeReport, UnsafePart, sanitize_history
from tether.messages import Message, ToolResult
from tether.models.wire import ConversionReport
from tether.stores.events import RunRecord

from ._errors import ApiError
from ._state import ServeState

__all__ = ["Origin", "Thread", "client_positions", "losses", "open_thread", "seed_thread"]

log = logging.getLogger("tether.serve")


@dataclass(frozen=True, slots=True)
class Thread:
    """A conversation a request named: ``created`` when the caller has no conversation with that
    id (another owner's is absent too), ``latest`` its newest run (``None``: none yet)."""

    conversation_id: str
    created: bool
    latest: RunRecord | None


async def open_thread(state: ServeState, owner: str, cid: str) -> Thread:
    """The caller's thread ``cid``; 409 when a run of it is running (one turn at a time)."""
    try:
        await state.store.info(owner, cid)
        created = False
    except NotFound:
        created = True
    latest = None if created else next(iter(await state.events.runs(owner, cid, limit=1)), None)
    if latest is not None and latest.status == "running":
        raise ApiError(
            409,
            f"thread {cid!r} has a running run {latest.run_id!r}: wait for it to end, or stop it "
            f"(POST /v1/runs/{latest.run_id}/cancel)",
        )
    return Thread(cid, created, latest)


async def seed_thread(state: ServeState, owner: str, cid: str, seed: list[Message]) -> SanitizeReport:
    """Create the conversation ``cid`` holding ``seed`` (a client's messages, converted) after
    ``sanitize_history`` under the service's limits; the report says what it changed."""
    clean, sanitized = sanitize_history(seed, limits=state.config.limits)
    await state.store.create(owner, cid, exist_ok=True)
    if clean:
        await state.store.append(owner, cid, clean, expected_version=0)
    log.info("thread %s of %s seeded: %s", cid, owner, sanitized.to_json().decode())
    return sanitized


def losses(report: ConversionReport) -> list[dict[str, Any]]:
    """A conversion report's losses as JSON objects (positions in the client's messages)."""
    return [
        {"message": x.message, "part": x.part, "kind": x.kind, "what": x.what, "reason": x.reason}
        for x in report.losses
    ]


@dataclass(frozen=True, slots=True)
class Origin:
    """Where one converted message came from in the request. ``parts[k]``: the client message of
    tether part ``k`` and the index in its ``content`` list (``None``: a string content, or not
    content: a tool call, an ``error``). ``results[k]``: for a tool message, the same for each
    content item of result ``k`` (consecutive client tool messages become one tether message)."""

    message: int
    parts: tuple[tuple[int, int | None], ...] = ()
    results: tuple[tuple[int | None, ...], ...] = ()

    @property
    def messages(self) -> tuple[int, ...]:
        """Every client message this one was made of, in order."""
        return tuple(dict.fromkeys((self.message, *(m for m, _ in self.parts))))


def client_positions(report: SanitizeReport, seed: list[Message], origins: list[Origin]) -> dict[str, Any]:
    """``sanitize_history``'s report on ``seed`` (converted with ``origins``), its indexes turned
    into positions in the client's ``messages`` (and ``content`` lists): the client's view.

    A part inside a tool result is the client tool message's ``content[part]`` (``content`` is
    then ``None``); a tool message that was merged from several client ones is every one of them
    in ``removed``."""

    def source(ref: CallRef) -> int:
        origin = origins[ref.message]
        ids = [p.call_id if isinstance(p, ToolResult) else None for p in seed[ref.message].parts]
        hits = [k for k, cid in enumerate(ids) if cid == ref.call_id]
        if not hits or len(origin.parts) != len(ids):
            return origin.message
        return origin.parts[hits[-1] if ref.reason == "duplicate" else hits[0]][0]

    def refs(items: tuple[CallRef, ...], *, by_call: bool = False) -> tuple[CallRef, ...]:
        return tuple(replace(r, message=source(r) if by_call else origins[r.message].message) for r in items)

    def unsafe(u: UnsafePart) -> UnsafePart:
        origin = origins[u.message]
        message, part = origin.parts[u.part]
        if u.content is not None:
            part = origin.results[u.part][u.content]
        return replace(u, message=message, part=part if part is not None else u.part, content=None)

    repair = report.repair
    mapped = replace(
        report,
        unsafe_parts=tuple(unsafe(u) for u in report.unsafe_parts),
        removed=tuple(origins[i].message for i in report.removed),
        repair=replace(
            repair,
            synthesized=refs(repair.synthesized),
            dropped=refs(repair.dropped, by_call=True),
            removed=tuple(m for i in repair.removed for m in origins[i].messages),
            truncated=refs(repair.truncated),
            unpaired=refs(repair.unpaired),
        ),
    )
    return mapped.to_dict()
