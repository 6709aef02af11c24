"""``/v1/conversations``: list, create, read, delete, fork, export and import (sanitized)."""

from __future__ import annotations

import logging

from starlette.responses import Response

from tether.convert import FORMATS
from tether.history import check_history, sanitize_history
from tether.models.wire import ConversionReport
from tether.stores import ConversationInfo

from ._api import Api, Call, Query, json_response, query_int
from ._errors import ApiError
from ._schemas import (
    CompactionList,
    CompactionOut,
    ConversationCreate,
    ConversationCreated,
    ConversationList,
    ConversationOut,
    ConversationSummary,
    ExportOut,
    ForkIn,
    ImportIn,
    ImportOut,
    LossOut,
)

__all__ = ["register", "routes"]

log = logging.getLogger("tether.serve")
_PAGE = Query("limit", "Page size (1-1000, default 100).", {"type": "integer", "minimum": 1, "maximum": 1000})
_OFFSET = Query("offset", "Items to skip (default 0).", {"type": "integer", "minimum": 0})
_FORMAT = Query(
    "format",
    "A tether.convert format (default tether).",
    {"type": "string", "enum": list(FORMATS)},
)
_TAGS = ("conversations",)
routes = Api()
"""The routes of this module, in the order the API lists them."""


def summary(info: ConversationInfo) -> ConversationSummary:
    forked = info.forked_from
    return ConversationSummary(
        id=info.conversation_id,
        messages=info.version,
        created_at=info.created_at.isoformat(),
        updated_at=info.updated_at.isoformat(),
        preview=info.preview,
        last_model=info.last_model,
        forked_from=forked[0] if forked else None,
        forked_at=forked[1] if forked else None,
    )


def _losses(report: ConversionReport) -> list[LossOut]:
    return [LossOut(x.message, x.part, x.kind, x.what, x.reason) for x in report.losses]


async def _fork_point(call: Call[ForkIn], owner: str, cid: str, at_version: int | None) -> int | None:
    """The version to fork at (pinned: a run may append meanwhile); refuses a point that leaves a
    tool call of the copied messages without its result."""
    loaded = await call.state.store.load(owner, cid)
    at = loaded.version if at_version is None else at_version
    if not 0 <= at <= loaded.version:
        return at_version  # the store names the bad version
    open_call = next((p for p in check_history(loaded.messages[:at]) if p.kind == "missing-result"), None)
    if open_call is None:
        return at
    where = f"message {open_call.message} (call {open_call.call_id!r})"
    active = await call.state.events.runs(owner, cid, limit=1, active_only=True)
    if active and at == loaded.version:
        raise ApiError(
            409,
            f"conversation {cid!r} has a tool step in progress at {where} (run {active[0].run_id!r} is "
            f"{active[0].status}): fork once the run ends, or at_version <= {open_call.message}",
        )
    raise ApiError(
        422,
        f"$.at_version: {at} separates the tool calls of {where} from their results; fork at "
        f"{open_call.message} or after the results",
    )


@routes.route(
    "GET",
    "/v1/conversations",
    summary="List your conversations, most recently updated first",
    response=ConversationList,
    query=(_PAGE, _OFFSET),
    errors=(400, 401),
    tags=_TAGS,
)
async def list_conversations(call: Call[None]) -> Response:
    limit = query_int(call.request, "limit", 50, low=1, high=1000)
    offset = query_int(call.request, "offset", 0)
    infos = await call.state.store.conversations(call.caller.owner, limit=limit + 1, offset=offset)
    more = len(infos) > limit
    return json_response(
        ConversationList([summary(i) for i in infos[:limit]], offset + limit if more else None)
    )


@routes.route(
    "POST",
    "/v1/conversations",
    summary="Create an empty conversation",
    body=ConversationCreate,
    body_required=False,
    response=ConversationCreated,
    status=201,
    errors=(400, 401, 409, 413, 422),
    tags=_TAGS,
)
async def create_conversation(call: Call[ConversationCreate]) -> Response:
    given = call.body.id  # its pattern is checked when the body is decoded
    cid = await call.state.store.create(call.caller.owner, given)
    return json_response(ConversationCreated(cid), 201)


@routes.route(
    "POST",
    "/v1/conversations/import",
    summary="Import a client-held history (sanitized; the report is returned)",
    body=ImportIn,
    response=ImportOut,
    status=201,
    errors=(400, 401, 413, 422),
    tags=_TAGS,
)
async def import_conversation(call: Call[ImportIn]) -> Response:
    """The history is untrusted: converted from its format, then ``sanitize_history`` drops
    system prompts and unsafe media, repairs pairing and enforces the size limits (413
    naming the limit). The ``SanitizeReport`` is returned and logged."""
    fmt = FORMATS.get(call.body.format.replace("-", "_"))
    if fmt is None:
        raise ApiError(
            400, f"$.format: unknown format {call.body.format[:60]!r}; one of {', '.join(FORMATS)}"
        )
    messages, conversion = fmt.load(call.body.data)
    clean, report = sanitize_history(messages, limits=call.state.config.limits)
    owner = call.caller.owner
    cid = await call.state.store.create(owner)
    if clean:
        await call.state.store.append(owner, cid, clean, expected_version=0)
    log.info("import by %s into %s: %s", owner, cid, report.to_json().decode())
    return json_response(
        ImportOut(cid, len(clean), report.to_dict(), _losses(conversion)),
        201,
    )


@routes.route(
    "GET",
    "/v1/conversations/{conversation_id}",
    summary="Read a conversation: one page of its messages in the tether JSON contract",
    response=ConversationOut,
    query=(_PAGE, _OFFSET),
    errors=(400, 401, 404),
    tags=_TAGS,
)
async def read_conversation(call: Call[None]) -> Response:
    cid = call.path("conversation_id")
    limit = query_int(call.request, "limit", 100, low=1, high=1000)
    offset = query_int(call.request, "offset", 0)
    owner = call.caller.owner
    info = await call.state.store.info(owner, cid)
    start = min(offset, info.version)
    loaded = await call.state.store.load(owner, cid, since=start)
    page = list(loaded.messages[:limit])
    end = start + len(page)
    return json_response(
        ConversationOut(cid, loaded.version, start, page, end if end < loaded.version else None)
    )


@routes.route(
    "DELETE",
    "/v1/conversations/{conversation_id}",
    summary="Delete a conversation, its runs and their events",
    status=204,
    errors=(401, 404, 409),
    tags=_TAGS,
)
async def delete_conversation(call: Call[None]) -> Response:
    cid = call.path("conversation_id")
    owner = call.caller.owner
    await call.state.store.info(owner, cid)
    await call.state.events.delete_runs(owner, cid)
    await call.state.store.delete(owner, cid)
    return Response(status_code=204)


@routes.route(
    "POST",
    "/v1/conversations/{conversation_id}/fork",
    summary="Copy a conversation (all of it, or its first at_version messages) under a new id",
    body=ForkIn,
    body_required=False,
    response=ConversationCreated,
    status=201,
    errors=(400, 401, 404, 409, 413, 422),
    tags=_TAGS,
)
async def fork_conversation(call: Call[ForkIn]) -> Response:
    """A fork never ends inside a tool step: the copy would answer the open calls "interrupted
    before execution" although the tools ran, or may be running (409 while the conversation
    has an active run, else 422 naming the message)."""
    owner, cid = call.caller.owner, call.path("conversation_id")
    at = await _fork_point(call, owner, cid, call.body.at_version)
    new = await call.state.store.fork(owner, cid, at)
    return json_response(ConversationCreated(new), 201)


@routes.route(
    "GET",
    "/v1/conversations/{conversation_id}/compactions",
    summary="A conversation's compaction records: what the model sees in place of older messages",
    response=CompactionList,
    errors=(401, 404),
    tags=_TAGS,
)
async def list_compactions(call: Call[None]) -> Response:
    """A long conversation is compacted at 80% of the model's context window: a record's
    summary stands for the messages up to its ``boundary`` in what the model is sent, while
    the conversation keeps every message (docs/compaction.md)."""
    owner, cid = call.caller.owner, call.path("conversation_id")
    await call.state.store.info(owner, cid)  # 404 for an absent conversation, not an empty list
    records = await call.state.store.records(owner, cid)
    out = [
        CompactionOut(
            r.id,
            r.boundary,
            r.previous_boundary,
            r.summary,
            r.model,
            r.tokens_before,
            r.tokens_after,
            r.created_at.isoformat(),
        )
        for r in records
    ]
    return json_response(CompactionList(out))


@routes.route(
    "GET",
    "/v1/conversations/{conversation_id}/export",
    summary="Export a conversation in any tether.convert format, with what the format lost",
    response=ExportOut,
    query=(_FORMAT,),
    errors=(400, 401, 404),
    tags=_TAGS,
)
async def export_conversation(call: Call[None]) -> Response:
    name = call.request.query_params.get("format", "tether")
    fmt = FORMATS.get(name.replace("-", "_"))
    if fmt is None:
        raise ApiError(
            400, f"query parameter 'format': unknown format {name[:60]!r}; one of {', '.join(FORMATS)}"
        )
    loaded = await call.state.store.load(call.caller.owner, call.path("conversation_id"))
    data, report = fmt.dump(list(loaded.messages))
    return json_response(ExportOut(fmt.name, data, _losses(report)))


def register(api: Api) -> None:
    api.include(routes)
