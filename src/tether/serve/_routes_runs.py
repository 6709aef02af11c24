"""Runs: start (detached), read, stream events (SSE, resumable), cancel, decide."""

from __future__ import annotations

from starlette.responses import Response

from tether.stores.events import RunRecord

from ._api import Api, Call, Query, json_response, query_int
from ._errors import ApiError, check_part_bytes
from ._numbers import COUNT_PATTERN
from ._pause import decode_pause
from ._schemas import DecisionsIn, PauseOut, PendingCallOut, RunIn, RunList, RunOut
from ._sse import SSE_HEADERS, SlotStream, check_resume_point, event_stream, resume_point

__all__ = ["check_prompt", "register", "routes", "run_out"]

_TAGS = ("runs",)
routes = Api()
"""The routes of this module, in the order the API lists them."""
_AFTER = Query(
    "after", "Resume after this event id (Last-Event-ID takes precedence).", {"type": "integer", "minimum": 0}
)
_LAST_EVENT_ID = Query(
    "Last-Event-ID",
    "The id of the last event the client has (ASCII digits).",
    {"type": "string", "pattern": COUNT_PATTERN},
)


def check_prompt(prompt: str, limit: int, where: str) -> None:
    """422 for an empty prompt, 413 for one over ``limit`` UTF-8 bytes (``where``: its JSON path)."""
    if not prompt.strip():
        raise ApiError(422, f"{where}: the prompt is empty")
    check_part_bytes(prompt, limit, where)


def run_out(record: RunRecord) -> RunOut:
    pause = None
    if record.status == "paused" and record.pause is not None:
        stored = decode_pause(record.pause)
        pause = PauseOut(
            stored.pause_id,
            [PendingCallOut(c.call.id or "", c.call.name, c.call.arguments, c.kind) for c in stored.calls],  # type: ignore[arg-type]
            stored.expires_at,
        )
    return RunOut(
        id=record.run_id,
        conversation_id=record.conversation_id,
        status=record.status,
        created_at=record.created_at.isoformat(),
        updated_at=record.updated_at.isoformat(),
        last_seq=record.last_seq,
        events_url=f"/v1/runs/{record.run_id}/events",
        pause=pause,
    )


@routes.route(
    "POST",
    "/v1/conversations/{conversation_id}/runs",
    summary="Start a run (detached: it goes on when every client disconnects)",
    body=RunIn,
    response=RunOut,
    status=202,
    errors=(400, 401, 404, 409, 413, 422),
    tags=_TAGS,
)
async def start_run(call: Call[RunIn]) -> Response:
    """Returns the run's id at once; follow it at ``events_url``. A conversation with an
    active run (running, or paused for decisions) answers 409."""
    prompt = call.body.prompt
    check_prompt(prompt, call.state.config.limits.max_part_bytes, "$.prompt")
    record = await call.state.manager.start(call.caller, call.path("conversation_id"), prompt)
    return json_response(run_out(record), 202)


@routes.route(
    "GET",
    "/v1/conversations/{conversation_id}/runs",
    summary="The runs of a conversation, newest first",
    response=RunList,
    query=(
        Query(
            "limit",
            "At most this many (1-200, default 20).",
            {"type": "integer", "minimum": 1, "maximum": 200},
        ),
    ),
    errors=(400, 401, 404),
    tags=_TAGS,
)
async def list_runs(call: Call[None]) -> Response:
    cid = call.path("conversation_id")
    limit = query_int(call.request, "limit", 20, low=1, high=200)
    await call.state.store.info(call.caller.owner, cid)
    records = await call.state.events.runs(call.caller.owner, cid, limit=limit)
    return json_response(RunList([run_out(r) for r in records]))


@routes.route(
    "GET",
    "/v1/runs/{run_id}",
    summary="A run's status (and, when paused, its pending calls)",
    response=RunOut,
    errors=(401, 404),
    tags=_TAGS,
)
async def read_run(call: Call[None]) -> Response:
    record = await call.state.events.get_run(call.caller.owner, call.path("run_id"))
    return json_response(run_out(record))


@routes.route(
    "GET",
    "/v1/runs/{run_id}/events",
    summary="The run's events as Server-Sent Events (id = sequence number; resumable)",
    query=(_AFTER,),
    headers=(_LAST_EVENT_ID,),
    errors=(400, 401, 404, 429),
    stream=True,
    tags=_TAGS,
)
async def run_events(call: Call[None]) -> Response:
    """Every event after ``Last-Event-ID`` (or ``?after=``), then live ones; no duplicate, no
    gap. The stream ends after the run's last event."""
    after = resume_point(call.request)
    record = await call.state.events.get_run(call.caller.owner, call.path("run_id"))
    check_resume_point(after, record)
    if call.request.method == "HEAD":  # the headers only: no stream to keep open until the run ends
        return Response(media_type="text/event-stream", headers=SSE_HEADERS)
    slot = call.state.streams.take(call.caller.owner)
    stream = event_stream(
        call.state.events,
        record,
        after,
        ping_interval=call.state.config.ping_interval,
        allowed=lambda: call.state.auth.still_allowed(call.request, call.caller),
    )
    return SlotStream(stream, slot)


@routes.route(
    "POST",
    "/v1/runs/{run_id}/cancel",
    summary="Stop a run (the explicit Stop; a disconnect is not one)",
    response=RunOut,
    errors=(401, 404),
    tags=_TAGS,
)
async def cancel_run(call: Call[None]) -> Response:
    """The run ends with ``run.canceled``; what it did so far is stored. Idempotent."""
    record = await call.state.manager.cancel(call.caller, call.path("run_id"))
    return json_response(run_out(record))


@routes.route(
    "POST",
    "/v1/runs/{run_id}/decisions",
    summary="Approve or deny a paused run's pending calls (accepted once)",
    body=DecisionsIn,
    response=RunOut,
    status=202,
    errors=(400, 401, 404, 409, 413, 422),
    tags=_TAGS,
)
async def decide(call: Call[DecisionsIn]) -> Response:
    """Checked against the pause stored on the server, never against anything the client
    holds: one decision per pending call of ``pause_id``; the run resumes at once."""
    record = await call.state.manager.decide(call.caller, call.path("run_id"), call.body)
    return json_response(run_out(record), 202)


def register(api: Api) -> None:
    api.include(routes)
