"""``POST /v1/aisdk/chat`` and ``GET /v1/aisdk/chat/{chat_id}/stream``: the agent as the AI SDK's
chat endpoint (``useChat`` with ``DefaultChatTransport({ api: "/v1/aisdk/chat" })``).

The chat id is one of the caller's conversations (created when new); the assistant message of a
turn has tether's run id as its id. The client's messages are untrusted: for a new chat, those
before the prompt are converted, sanitized and stored; for a chat the server holds, its history
is used and the client's copy ignored. A paused run is resumed by the next request: the client's
copy of the paused turn carries the approval answers (``addToolApprovalResponse``) and the outputs
of the tools it runs itself (``addToolOutput``). The reconnect route replays the chat's running
(or paused) turn from the durable log: a reload re-attaches to it. Decisions made in ADR 0018.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import Response

from tether.errors import NotFound
from tether.models.wire import ConversionReport
from tether.stores.events import RunRecord

from .._api import Api, Call, Query, json_response, query_int
from .._boundary import Origin, Thread, client_positions, losses, open_thread, seed_thread
from .._errors import ApiError, check_part_bytes
from .._events import TERMINAL_TYPES
from .._pause import decode_pause
from .._routes_runs import check_prompt
from .._schemas import Decision, DecisionsIn
from .._sse import Slot, SlotStream, check_resume_point, follow_log, resume_point
from ._chunks import Translator, approval_id, encode
from ._history import ChatMessages, ui_messages
from ._input import ChatRequest, ToolAnswer, prompt_of, to_tether, tool_answers

__all__ = ["HEADER", "register"]

log = logging.getLogger("tether.serve")
HEADER = ("x-vercel-ai-ui-message-stream", "v1")
"""The response header that tells the AI SDK it reads a UI message stream."""
_UNTIL = TERMINAL_TYPES | {"run.paused"}
_TAGS = ("ai-sdk",)
_LIMIT = Query(
    "limit",
    "At most this many stored messages, the latest (1-1000, default 1000).",
    {"type": "integer", "minimum": 1, "maximum": 1000},
)
_LAST_EVENT_ID = Query(
    "Last-Event-ID", "Send only what follows this event id (an id the stream sent).", {"type": "string"}
)
_CHUNK: dict[str, Any] = {
    "type": "object",
    "description": "An AI SDK UI message chunk (start, text-delta, tool-input-available, finish, ...)",
    "properties": {"type": {"type": "string"}},
    "required": ["type"],
}


@dataclass
class _Plan:
    """What a request turned into, before its stream starts: the run, the last event the client
    already has (the stream sends what follows), and the report of what was done with the input."""

    record: RunRecord
    after: int
    report: dict[str, Any] = field(default_factory=lambda: {})


def _decision(call_id: str, kind: str, answer: ToolAnswer, expected: str, limit: int) -> Decision:
    if kind == "approval":
        if answer.approved is None:
            raise ApiError(422, f"{answer.where}: call {call_id!r} waits for an approval, not an output")
        if answer.approval_id != expected:
            raise ApiError(
                409,
                f"{answer.where}.approval.id: {str(answer.approval_id)[:100]!r} is not the pending "
                f"approval {expected!r} (the turn was paused again since)",
            )
        if answer.approved:
            return Decision(call_id, "approve")
        if answer.reason is not None:
            check_part_bytes(answer.reason, limit, f"{answer.where}.approval.reason")
        return Decision(call_id, "deny", reason=answer.reason)
    if not answer.has_output:
        raise ApiError(422, f"{answer.where}: call {call_id!r} is the client's own: send its output")
    return Decision(call_id, "result", value=answer.output, failed=answer.failed)


async def _resume(call: Call[ChatRequest], run: RunRecord, report: dict[str, Any]) -> _Plan:
    """Answer the paused run's calls from the client's copy of the paused turn."""
    body = call.body
    assert run.pause is not None
    pause = decode_pause(run.pause)
    last = len(body.messages) - 1
    turn = body.messages[last] if last >= 0 else None
    answers = tool_answers(turn, last) if turn is not None and turn.role == "assistant" else {}
    limit = call.state.config.limits.max_part_bytes
    decisions: list[Decision] = []
    missing: list[str] = []
    for pending in pause.calls:
        call_id = pending.call.id or ""
        answer = answers.get(call_id)
        if answer is None:
            missing.append(call_id)
            continue
        expected = approval_id(pause.pause_id, call_id)
        decisions.append(_decision(call_id, pending.kind, answer, expected, limit))
    if missing:
        raise ApiError(
            422,
            f"chat {run.conversation_id!r} waits for its turn {run.run_id!r}: answer its pending "
            f"call(s) {', '.join(map(repr, missing))} in the last (assistant) message "
            "(addToolApprovalResponse, addToolOutput) or stop it "
            f"(POST /v1/runs/{run.run_id}/cancel)",
        )
    resumed = await call.state.manager.decide(call.caller, run.run_id, DecisionsIn(pause.pause_id, decisions))
    report.update(history="server", ignoredMessages=len(body.messages), resumed=True)
    return _Plan(resumed, run.last_seq, report)


async def _prepare(call: Call[ChatRequest]) -> _Plan:
    """Everything that can be refused is refused here, as an HTTP error, before the stream."""
    body, state, owner = call.body, call.state, call.caller.owner
    if body.trigger == "regenerate-message":
        raise ApiError(
            422,
            "$.trigger: regenerate-message is not supported: tether keeps every turn of a "
            "conversation; send the prompt again as a new message",
        )
    thread: Thread = await open_thread(state, owner, body.id)
    report: dict[str, Any] = {
        "created": thread.created,
        "history": "server",
        "ignoredMessages": 0,
        "sanitize": None,
        "losses": [],
        "resumed": False,
    }
    if thread.latest is not None and thread.latest.status == "paused":
        return await _resume(call, thread.latest, report)
    last = len(body.messages) - 1
    if last < 0 or body.messages[last].role != "user":
        raise ApiError(422, "$.messages: the last message must be the user's prompt")
    if body.message_id is not None and body.message_id == body.messages[last].id:
        raise ApiError(
            422,
            "$.messageId: editing a sent message is not supported: tether keeps every turn of a "
            "conversation; send the new text as a new message",
        )
    prompt, conversion = prompt_of(body.messages[last], last)
    check_prompt(prompt, state.config.limits.max_part_bytes, f"$.messages[{last}].parts")
    if thread.created:
        origins: list[Origin] = []
        seed, seeded = to_tether(body.messages[:last], origins=origins)
        sanitized = await seed_thread(state, owner, body.id, seed)
        conversion = ConversionReport([*seeded.losses, *conversion.losses])
        report.update(history="client", sanitize=client_positions(sanitized, seed, origins))
    else:
        report["ignoredMessages"] = last
    report["losses"] = losses(conversion)
    record = await state.manager.start(call.caller, body.id, prompt)
    return _Plan(record, 0, report)


async def _chunks(call: Call[Any], plan: _Plan) -> AsyncIterator[bytes]:
    """The run's chunks: every event is translated from the run's first one (the translator's
    state is the whole turn's), those up to ``plan.after`` are not sent again."""
    record, after, state = plan.record, plan.after, call.state
    translator = Translator(record.run_id, record.conversation_id)
    meta = translator.meta(input=plan.report) if plan.report else translator.meta()
    yield encode({"type": "start", "messageId": record.run_id, "messageMetadata": meta})
    try:
        async for found in follow_log(
            state.events,
            record,
            0,
            ping_interval=state.config.ping_interval,
            until=TERMINAL_TYPES,
            allowed=lambda: state.auth.still_allowed(call.request, call.caller),
        ):
            if found is None:
                yield b": ping\n\n"
                continue
            for event in found:
                chunks = translator.feed(event.data)
                if event.seq > after and chunks:
                    yield b"".join(encode(c) for c in chunks[:-1]) + encode(chunks[-1], event.seq)
                if translator.paused is not None and await _still_paused(call, record, event.seq):
                    yield b"".join(encode(c) for c in translator.finish_paused())
                    yield b"data: [DONE]\n\n"
                    return
            if translator.done:
                yield b"data: [DONE]\n\n"
                return
    except ApiError as exc:  # the caller's token was revoked while the stream was open
        yield encode({"type": "error", "errorText": exc.message})
    except Exception:
        log.exception("ai-sdk stream of run %s failed", record.run_id)
        yield encode({"type": "error", "errorText": "internal error"})


async def _still_paused(call: Call[Any], record: RunRecord, seq: int) -> bool:
    """Whether the pause at ``seq`` is where the run still stands (a resumed run goes on)."""
    try:
        now = await call.state.events.get_run(call.caller.owner, record.run_id)
    except NotFound:
        return True
    return now.status == "paused" and now.last_seq == seq


def _stream(call: Call[Any], plan: _Plan, slot: Slot) -> Response:
    response = SlotStream(_chunks(call, plan), slot)
    response.headers[HEADER[0]] = HEADER[1]
    return response


def register(api: Api) -> None:
    """Declare the AI SDK routes on the service's route table."""

    @api.route(
        "POST",
        "/v1/aisdk/chat",
        summary="Run the agent as the AI SDK's chat endpoint: UI messages in, a UI message stream out",
        body=ChatRequest,
        errors=(400, 401, 409, 413, 415, 422, 429),
        stream=True,
        stream_event=_CHUNK,
        tags=_TAGS,
    )
    async def aisdk_chat(call: Call[ChatRequest]) -> Response:
        """``id`` is one of your conversations (created when new); the assistant message's id is
        tether's run id. The run is detached like every run: a disconnect does not stop it
        (``POST /v1/runs/{runId}/cancel`` does). See docs/ai-sdk.md."""
        slot = call.state.streams.take(call.caller.owner)  # before a run starts: 429 starts none
        try:
            plan = await _prepare(call)
        except BaseException:
            slot.release()
            raise
        return _stream(call, plan, slot)

    @api.route(
        "GET",
        "/v1/aisdk/chat/{chat_id}/stream",
        summary="Re-attach to the chat's running or paused turn (204: none)",
        headers=(_LAST_EVENT_ID,),
        errors=(204, 400, 401, 429),
        stream=True,
        stream_event=_CHUNK,
        tags=_TAGS,
    )
    async def aisdk_reconnect(call: Call[None]) -> Response:
        """The turn again from its start (``Last-Event-ID``: after that event), then live;
        204 when the chat has no running or paused turn, or is not one of yours."""
        owner, cid = call.caller.owner, call.path("chat_id")
        after = resume_point(call.request)
        try:
            latest = next(iter(await call.state.events.runs(owner, cid, limit=1)), None)
        except NotFound:
            latest = None
        if latest is None or latest.status not in ("running", "paused"):
            return Response(status_code=204)
        check_resume_point(after, latest)
        if call.request.method == "HEAD":  # the headers only: no stream to keep open
            return Response(media_type="text/event-stream", headers=dict([HEADER]))
        return _stream(call, _Plan(latest, after), call.state.streams.take(owner))

    @api.route(
        "GET",
        "/v1/aisdk/chat/{chat_id}/messages",
        summary="The chat's stored messages as AI SDK UI messages (useChat's initial messages)",
        response=ChatMessages,
        query=(_LIMIT,),
        errors=(400, 401),
        tags=_TAGS,
    )
    async def aisdk_messages(call: Call[None]) -> Response:
        """``{"messages": [...]}``: one assistant message per turn, its id the run id (the
        stream's message id); empty for a chat that is not one of yours (or not yet made)."""
        cid, owner = call.path("chat_id"), call.caller.owner
        limit = query_int(call.request, "limit", 1000, low=1, high=1000)
        try:
            version = (await call.state.store.info(owner, cid)).version
            start = max(0, version - limit)
            stored = list((await call.state.store.load(owner, cid, since=start)).messages)
        except NotFound:
            return json_response(ChatMessages([]))
        while start > 0 and stored and stored[0].role != "user":  # a cut chat begins at a turn
            stored, start = stored[1:], start + 1
        return json_response(ChatMessages(ui_messages(cid, stored, start), start))
