"""The span tree of real runs, with the SDK's in-memory exporter: two tool steps, an approval,
a failure and a resume over a real SQLite file; exact attribute names and values; no content
without the opt-in; the metrics."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from tether import Message, ModelError, ToolCall, assistant
from tether.agent import Agent, DeferredResults, Tool
from tether.models.testing import FunctionInfo, FunctionModel
from tether.stores import SQLiteStore

from .conftest import Otel, children


class Script:
    """Turn 1 looks up a city; turn 2 looks up another and asks to charge (needs an approval);
    turn 3 fails at the provider; turn 4 answers."""

    def __init__(self) -> None:
        self.turn = 0

    def __call__(self, messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        self.turn += 1
        if self.turn == 1:
            return assistant(ToolCall("c1", "lookup", '{"city": "Oslo"}'))
        if self.turn == 2:
            return assistant(
                ToolCall("c2", "lookup", '{"city": "Bergen"}'), ToolCall("c3", "charge", '{"amount": 40}')
            )
        if self.turn == 3:
            raise RuntimeError("provider down")
        return "Booked: Oslo and Bergen, 40 charged."


async def lookup(city: str) -> str:
    """Find a hotel in a city."""
    return f"Hotel Secret in {city}"


async def charge(amount: int) -> str:
    return f"charged {amount}"


def booking_agent(otel: Otel, **telemetry: Any) -> Agent[Any, str]:
    return Agent(
        FunctionModel(Script(), name="scripted"),
        tools=[lookup, Tool(charge, requires_approval=True, idempotent=False)],
        name="booking",
        telemetry=otel.telemetry(**telemetry),
    )


def roots(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.parent is None), key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_paused_failed_and_resumed_conversation_is_one_joined_trace_per_run(
    otel: Otel, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "c.db")
    agent = booking_agent(otel)
    try:
        first = await agent.run("Book Oslo and Bergen", store=store, owner="ann")
        assert first.deferred is not None
        cid = first.conversation_id
        try:
            await agent.run(
                deferred=DeferredResults(approvals={"c3": True}),
                store=store,
                owner="ann",
                conversation_id=cid,
            )
        except ModelError as exc:
            failure = exc
        else:  # pragma: no cover
            raise AssertionError("the scripted provider failure did not fail the run")
        assert failure.partial is not None
        third = await agent.run("go on", store=store, owner="ann", conversation_id=cid)
    finally:
        await store.close()

    spans = otel.spans()
    runs = roots(spans)
    assert [s.name for s in runs] == ["invoke_agent booking"] * 3
    paused, failed, resumed = runs
    for run, result_run_id in zip(runs, [first.run_id, failure.partial.run_id, third.run_id], strict=True):
        a = attrs(run)
        assert run.kind is SpanKind.INTERNAL
        assert a["gen_ai.operation.name"] == "invoke_agent"
        assert a["gen_ai.agent.name"] == "booking"
        assert a["gen_ai.provider.name"] == "function"
        assert a["gen_ai.request.model"] == "scripted"
        assert a["gen_ai.conversation.id"] == cid
        assert a["tether.run.id"] == result_run_id
        # every span of a run is in that run's trace and names the same conversation
        for span in spans:
            if span.context.trace_id == run.context.trace_id and "gen_ai.conversation.id" in attrs(span):
                assert attrs(span)["gen_ai.conversation.id"] == cid

    # -- run 1: two model requests, one tool step, then a pause --------------------------------
    a = attrs(paused)
    assert a["tether.run.outcome"] == "deferred"
    assert a["tether.run.resumed"] is False
    assert a["tether.run.requests"] == 2
    assert a["tether.run.tool_executions"] == 1
    assert a["tether.run.pending_calls"] == 1
    assert paused.status.status_code is StatusCode.UNSET
    kids = children(spans, paused)
    # every completed step is stored before the next one starts (ADR 0015)
    assert [s.name for s in kids] == [
        "create tether_conversations",  # with the first write: the prompt, before the request
        "append tether_messages",
        "chat scripted",
        "append tether_messages",
        "execute_tool lookup",
        "append tether_messages",
        "chat scripted",
        "append tether_messages",
        "execute_tool lookup",
        "execute_tool charge",
    ]
    appends = [s for s in kids if s.name == "append tether_messages"]
    assert [attrs(s)["tether.store.messages"] for s in appends] == [1, 1, 1, 1]
    chat1, tool1, chat2 = kids[2], kids[4], kids[6]
    assert chat1.kind is SpanKind.CLIENT
    assert attrs(chat1) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "function",
        "gen_ai.request.model": "scripted",
        "gen_ai.conversation.id": cid,
        "gen_ai.output.type": "text",
        "gen_ai.request.stream": False,
        "tether.run.id": first.run_id,
        "tether.step": 1,
        "gen_ai.response.model": "scripted",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": first.new_messages[1].usage.input_tokens,  # type: ignore[union-attr]
        "gen_ai.usage.output_tokens": first.new_messages[1].usage.output_tokens,  # type: ignore[union-attr]
    }
    assert attrs(chat2)["tether.step"] == 2
    assert attrs(tool1) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Find a hotel in a city.",
        "gen_ai.conversation.id": cid,
        "tether.run.id": first.run_id,
        "tether.tool.idempotent": True,
        "tether.tool.status": "ok",
        "tether.tool.failed": False,
        "tether.tool.synthesized": False,
    }
    pending_lookup, pending_charge = kids[8], kids[9]
    assert attrs(pending_lookup)["tether.tool.status"] == "pending"
    assert "tether.tool.approval" not in attrs(pending_lookup)
    assert attrs(pending_charge)["tether.tool.status"] == "pending"
    assert attrs(pending_charge)["tether.tool.approval"] == "pending"
    assert attrs(pending_charge)["tether.tool.idempotent"] is False
    store_create = kids[0]
    assert store_create.kind is SpanKind.CLIENT
    assert attrs(store_create) == {
        "db.system.name": "sqlite",
        "db.operation.name": "create",
        "db.collection.name": "tether_conversations",
        "gen_ai.conversation.id": cid,
    }
    assert [e.name for e in paused.events] == ["tether.history.normalize"]

    # -- run 2: the approved batch runs (with the ledger), then the provider fails ---------------
    a = attrs(failed)
    assert a["tether.run.outcome"] == "failed"
    assert a["tether.run.resumed"] is True
    assert a["tether.run.stage"] == "model"
    assert a["error.type"] == "ModelError"
    assert a["tether.partial.requests"] == 0
    assert a["tether.partial.tool_executions"] == 2
    assert a["tether.partial.messages"] == 1
    assert failed.status.status_code is StatusCode.ERROR
    (exception,) = [e for e in failed.events if e.name == "exception"]
    ev = dict(exception.attributes or {})
    assert ev["exception.type"] == "tether.errors.ModelError"
    assert ev["tether.run.stage"] == "model"
    assert ev["tether.partial.requests"] == 0
    assert ev["tether.partial.tool_executions"] == 2
    assert ev["tether.partial.usage.input_tokens"] == 0
    assert ev["tether.partial.usage.output_tokens"] == 0
    kids = children(spans, failed)
    names = [s.name for s in kids]
    assert names[:2] == ["load tether_messages", "pending_tool_effects tether_tool_effects"]
    assert names.count("execute_tool lookup") == 1
    assert names.count("execute_tool charge") == 1
    assert names.index("record_tool_started tether_tool_effects") < names.index("execute_tool charge")
    charged = next(s for s in kids if s.name == "execute_tool charge")
    assert attrs(charged)["tether.tool.approval"] == "approved"
    assert attrs(charged)["tether.tool.ledger"] == "started"
    assert attrs(charged)["tether.tool.status"] == "ok"
    failed_chat = next(s for s in kids if s.name == "chat scripted")
    assert failed_chat.status.status_code is StatusCode.ERROR
    assert attrs(failed_chat)["error.type"] == "ModelError"
    assert attrs(failed_chat)["tether.step"] == 1

    # -- run 3: resumed from the stored evidence --------------------------------------------------
    a = attrs(resumed)
    assert a["tether.run.outcome"] == "completed"
    assert a["tether.run.requests"] == 1
    assert third.output.startswith("Booked")

    # -- no content without the opt-in -------------------------------------------------------------
    for span in spans:
        blob = json.dumps([attrs(span), [dict(e.attributes or {}) for e in span.events]], default=str)
        for secret in ("Oslo", "Bergen", "Hotel Secret", "Booked", "provider down"):
            if secret == "provider down" and span in (failed, failed_chat):
                continue  # the error message is the exception's, not content
            assert secret not in blob, (span.name, secret)
        assert not any(
            k.startswith(("gen_ai.input", "gen_ai.output.messages", "gen_ai.tool.call.a"))
            for k in attrs(span)
        )

    # -- metrics ------------------------------------------------------------------------------------
    metrics = otel.metrics()
    outcomes = {p[0]["tether.run.outcome"]: p[1] for p in metrics["tether.runs"]}
    assert outcomes == {"deferred": 1, "failed": 1, "completed": 1}
    failed_point = next(p for p in metrics["tether.runs"] if p[0]["tether.run.outcome"] == "failed")
    assert failed_point[0] == {
        "tether.run.outcome": "failed",
        "gen_ai.agent.name": "booking",
        "tether.run.stage": "model",
        "error.type": "ModelError",
    }
    tool_calls = {
        (p[0]["gen_ai.tool.name"], p[0]["tether.tool.status"]): p[1] for p in metrics["tether.tool.calls"]
    }
    assert tool_calls == {
        ("lookup", "ok"): 2,
        ("lookup", "pending"): 1,
        ("charge", "pending"): 1,
        ("charge", "ok"): 1,
    }
    tokens = {p[0]["gen_ai.token.type"]: p[1][0] for p in metrics["gen_ai.client.token.usage"]}
    assert tokens == {"input": 3, "output": 3}  # three answered requests, one point each
    durations = metrics["gen_ai.client.operation.duration"]
    assert sum(p[1][0] for p in durations) == 4
    assert any(p[0].get("error.type") == "ModelError" for p in durations)
