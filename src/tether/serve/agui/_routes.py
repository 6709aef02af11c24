"""``POST /v1/agui``: the agent over the AG-UI protocol (``RunAgentInput`` in, AG-UI events out).

Authenticated like every route; the caller owns everything. ``threadId`` is a conversation of the
caller (created when new), AG-UI's ``runId`` in the events is tether's run id. The client's
messages are untrusted: for a new thread, those before the prompt are converted, sanitized and
stored; for a thread the server holds, the server's history is used and the client's copy is
ignored. What was done is sent as the ``CUSTOM`` event ``tether.input`` before anything else. A
paused run is resumed by the next request: ``resume`` answers its approval interrupts, tool
messages answer the client's own (frontend) tools. Decisions made in ADR 0013.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec
from starlette.responses import Response

from tether.agent import Tool
from tether.errors import StoreError
from tether.messages import Message
from tether.models.wire import ConversionReport
from tether.stores.events import RunRecord

from .._api import Api, Call
from .._boundary import client_positions, losses, open_thread, seed_thread
from .._errors import ApiError, check_part_bytes
from .._events import TERMINAL_TYPES
from .._pause import decode_pause
from .._routes_runs import check_prompt
from .._schemas import Decision, DecisionsIn
from .._sse import UNAVAILABLE, SlotStream, follow_log
from ._events import Translator, agui_messages, encode, interrupt_id
from ._input import (
    Origin,
    ResumeEntry,
    RunAgentInput,
    ToolMessage,
    UserMessage,
    frontend_tools,
    to_tether,
)

__all__ = ["INPUT_EVENT", "register"]

log = logging.getLogger("tether.serve")
INPUT_EVENT = "tether.input"
"""The CUSTOM event that reports what the service did with the request's input."""
_UNTIL = TERMINAL_TYPES | {"run.paused"}
_AGUI_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "An AG-UI 1.0 event (RUN_STARTED, TEXT_MESSAGE_CONTENT, RUN_FINISHED, ...)",
    "properties": {"type": {"type": "string"}},
    "required": ["type"],
}


@dataclass
class _Plan:
    """What a request turned into, before its stream starts."""

    record: RunRecord
    after: int
    snapshot: list[Message]
    report: dict[str, Any] = field(default_factory=lambda: {})


def _ignored_fields(body: RunAgentInput) -> list[str]:
    given = {
        "state": body.state,
        "context": body.context,
        "forwardedProps": body.forwarded_props,
        "parentRunId": body.parent_run_id,
    }
    return [name for name, value in given.items() if value not in (None, [], {})]


def _approval(entry: ResumeEntry, where: str, call_id: str) -> Decision:
    if entry.status == "cancelled":
        return Decision(call_id, "deny", reason="the user cancelled the request")
    payload: object = entry.payload
    reason: object = None
    if isinstance(payload, dict):
        answer = cast(dict[str, object], payload)
        reason, payload = answer.get("reason"), answer.get("approved")
    if not isinstance(payload, bool) or (reason is not None and not isinstance(reason, str)):
        raise ApiError(
            422, f'{where}.payload: an approval answer is {{"approved": true|false, "reason"?: string}}'
        )
    return Decision(call_id, "approve" if payload else "deny", reason=reason if not payload else None)


def _external(entry: ResumeEntry, where: str, call_id: str) -> Decision:
    payload: object = entry.payload
    if entry.status == "cancelled":
        return Decision(call_id, "result", value="the user cancelled the call", failed=True)
    if not isinstance(payload, dict) or "result" not in payload:
        raise ApiError(422, f'{where}.payload: a tool result answer is {{"result": any, "failed"?: boolean}}')
    answer = cast(dict[str, object], payload)
    failed = answer.get("failed", False)
    if not isinstance(failed, bool):
        raise ApiError(422, f"{where}.payload.failed: a boolean is needed")
    return Decision(call_id, "result", value=answer["result"], failed=failed)


async def _resume(
    call: Call[RunAgentInput], run: RunRecord, tools: list[Tool[Any]], report: dict[str, Any]
) -> _Plan:
    """Answer the paused run's calls from ``resume`` and the client's tool messages."""
    body, owner = call.body, call.caller.owner
    assert run.pause is not None
    pause = decode_pause(run.pause)
    entries: dict[str, tuple[int, ResumeEntry]] = {}
    for i, entry in enumerate(body.resume or []):
        if entry.interrupt_id in entries:
            raise ApiError(422, f"$.resume[{i}].interruptId: {entry.interrupt_id!r} is answered twice")
        entries[entry.interrupt_id] = (i, entry)
    results = {m.tool_call_id: (i, m) for i, m in enumerate(body.messages) if isinstance(m, ToolMessage)}
    available = {t.name for t in (*call.state.manager.agent.tools, *tools)}
    limit = call.state.config.limits.max_part_bytes
    decisions: list[Decision] = []
    missing: list[str] = []
    used = 0
    lost = ConversionReport()
    for pending in pause.calls:
        call_id = pending.call.id or ""
        found = entries.pop(interrupt_id(pause.pause_id, call_id), None)
        where = f"$.resume[{found[0]}]" if found else "$.resume"
        if pending.kind == "approval":
            if found is None:
                missing.append(call_id)
            else:
                decisions.append(_approval(found[1], where, call_id))
            continue
        if pending.call.name not in available:
            # deciding without the tool would fail the run and lose the client's result
            raise ApiError(
                422,
                f"$.tools: the thread's paused run waits for the result of the client's tool "
                f"{pending.call.name!r} (call {call_id!r}); send the same tools as the request that "
                "started the run",
            )
        if call_id in results:
            index, message = results[call_id]
            converted, conversion = to_tether([message], first=index, media=False)
            lost.losses.extend(conversion.losses)
            result = converted[0].tool_results[0]
            check_part_bytes(result.text, limit, f"$.messages[{index}].content")
            decisions.append(Decision(call_id, "result", value=result.text, failed=result.failed))
            used += 1
        elif found is not None:
            decisions.append(_external(found[1], where, call_id))
        else:
            missing.append(call_id)
    if entries:
        index, entry = next(iter(entries.values()))
        raise ApiError(
            422,
            f"$.resume[{index}].interruptId: {entry.interrupt_id!r} is not an interrupt of this thread's "
            "paused run",
        )
    if missing:
        raise ApiError(
            422,
            f"the thread's run {run.run_id!r} is paused: answer its pending call(s) "
            f"{', '.join(map(repr, missing))} "
            "(approvals in $.resume, the client's tools with tool messages) or stop it "
            f"(POST /v1/runs/{run.run_id}/cancel)",
        )
    snapshot = list((await call.state.store.load(owner, run.conversation_id)).messages)
    resumed = await call.state.manager.decide(
        call.caller, run.run_id, DecisionsIn(pause.pause_id, decisions), extra_tools=tools
    )
    report.update(history="server", ignoredMessages=len(body.messages) - used, resumed=True)
    report["losses"] = losses(lost)
    return _Plan(resumed, run.last_seq, snapshot, report)


async def _prepare(call: Call[RunAgentInput]) -> _Plan:
    """Everything that can be refused is refused here, as an HTTP error, before the stream."""
    body, state, owner = call.body, call.state, call.caller.owner
    cid = body.thread_id
    tools = frontend_tools(body.tools, {t.name for t in state.manager.agent.tools})
    report: dict[str, Any] = {
        "conversationId": cid,
        "clientRunId": body.run_id,
        "created": False,
        "history": "server",
        "ignoredMessages": 0,
        "sanitize": None,
        "losses": [],
        "ignoredFields": _ignored_fields(body),
        "resumed": False,
    }
    thread = await open_thread(state, owner, cid)
    created, latest = thread.created, thread.latest
    if latest is not None and latest.status == "paused":
        return await _resume(call, latest, tools, report)
    if body.resume:
        raise ApiError(409, f"$.resume: thread {cid!r} has no paused run to resume")
    last = len(body.messages) - 1
    if last < 0 or not isinstance(body.messages[last], UserMessage):
        raise ApiError(
            422,
            "$.messages: the last message must be the user's prompt (or, when the thread's run is "
            "paused, the answers to its pending calls)",
        )
    prompted, conversion = to_tether(body.messages[last:], first=last, media=False)
    prompt = prompted[0].text
    check_prompt(prompt, state.config.limits.max_part_bytes, f"$.messages[{last}].content")
    if created:
        origins: list[Origin] = []
        seed, seeded = to_tether(body.messages[:last], origins=origins)
        sanitized = await seed_thread(state, owner, cid, seed)
        conversion.losses[:0] = seeded.losses
        report.update(created=True, history="client", sanitize=client_positions(sanitized, seed, origins))
    else:
        report["ignoredMessages"] = last
    report["losses"] = losses(conversion)
    snapshot = list((await state.store.load(owner, cid)).messages)
    record = await state.manager.start(call.caller, cid, prompt, extra_tools=tools)
    return _Plan(record, 0, snapshot, report)


async def _stream(call: Call[RunAgentInput], plan: _Plan) -> AsyncIterator[bytes]:
    record = plan.record
    run_id, cid = record.run_id, record.conversation_id
    yield encode({"type": "RUN_STARTED", "threadId": cid, "runId": run_id})
    plan.report["runId"] = run_id
    yield encode({"type": "CUSTOM", "name": INPUT_EVENT, "value": msgspec.to_builtins(plan.report)})
    yield encode({"type": "MESSAGES_SNAPSHOT", "messages": agui_messages(cid, plan.snapshot)})
    prefix = run_id if plan.after == 0 else f"{run_id}.{plan.after}"
    translator = Translator(run_id, cid, prefix=prefix)
    try:
        async for found in follow_log(
            call.state.events,
            record,
            plan.after,
            ping_interval=call.state.config.ping_interval,
            until=_UNTIL,
            allowed=lambda: call.state.auth.still_allowed(call.request, call.caller),
        ):
            if found is None:
                yield b": ping\n\n"
                continue
            for event in found:
                for out in translator.feed(event.data):
                    yield encode(out)
            if translator.done:
                return
    except ApiError as exc:  # the token was revoked, or the run deleted, while the stream was open
        code = "not_found" if exc.status == 404 else "unauthorized"
        yield encode({"type": "RUN_ERROR", "message": exc.message, "code": code})
    except StoreError as exc:  # the database went away (no traceback: nothing here is a bug)
        log.error("ag-ui stream of run %s: the event log failed: %s", run_id, exc)
        yield encode({"type": "RUN_ERROR", "message": UNAVAILABLE, "code": "unavailable"})
    except Exception:
        log.exception("ag-ui stream of run %s failed", run_id)
        yield encode({"type": "RUN_ERROR", "message": "internal error", "code": "internal"})


def register(api: Api) -> None:
    @api.route(
        "POST",
        "/v1/agui",
        summary="Run the agent over the AG-UI protocol: a RunAgentInput in, AG-UI events out",
        body=RunAgentInput,
        errors=(400, 401, 409, 413, 415, 422, 429),
        stream=True,
        stream_event=_AGUI_EVENT,
        tags=("ag-ui",),
    )
    async def agui_run(call: Call[RunAgentInput]) -> Response:
        """``threadId`` is one of your conversations (created when new); the events carry
        tether's run id as ``runId``. The run is detached like every run: a disconnect does not
        stop it (``POST /v1/runs/{runId}/cancel`` does). See docs/serve.md, AG-UI."""
        slot = call.state.streams.take(call.caller.owner)  # before a run starts: 429 starts none
        try:
            plan = await _prepare(call)
        except BaseException:
            slot.release()
            raise
        return SlotStream(_stream(call, plan), slot)
