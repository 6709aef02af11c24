"""Deferred results: approvals (HMAC-bound), denials, externally executed tools."""

from __future__ import annotations

import pytest

from tether import ApprovalError, ToolCall, UserError, assistant, dumps, loads, new_id
from tether.agent import Agent, Approve, DeferredResults, Deny, ExternalResult, Tool
from tether.history import check_history

from .scripts import Script, calls

SECRET = b"0123456789abcdef-secret"
executed: list[str] = []


def transfer(amount: int, to: str) -> str:
    """Move money."""
    executed.append(f"{amount}->{to}")
    return f"sent {amount} to {to}"


def balance() -> int:
    return 100


@pytest.fixture(autouse=True)
def _reset() -> None:
    executed.clear()


def _agent(script: Script, secret: bytes | None = SECRET) -> Agent[None, str]:
    return Agent(
        script.model,
        tools=[Tool(transfer, requires_approval=True), balance],
        approval_secret=secret,
    )


async def _deferred_run(script: Script, secret: bytes | None = SECRET):  # type: ignore[no-untyped-def]
    agent = _agent(script, secret)
    first = await agent.run("pay bob")
    return agent, first


async def test_approval_defers_the_whole_batch_and_approved_calls_run_on_resume() -> None:
    script = Script(
        calls(("c1", "balance", "{}"), ("c2", "transfer", '{"amount": 5, "to": "bob"}')),
        "paid",
    )
    agent, first = await _deferred_run(script)
    assert executed == []
    assert first.deferred is not None
    assert [p.call.id for p in first.deferred.approvals] == ["c2"]
    assert first.messages[-1].role == "assistant"  # history ends at the turn that asked
    with pytest.raises(Exception, match="pending tool calls"):
        _ = first.output
    # the client stores the history as JSON and returns with decisions
    pending = first.deferred.approvals[0]
    history = loads(dumps(first.messages))
    second = await agent.run(
        history=history, deferred=DeferredResults(approvals={"c2": Approve(pending.token)})
    )
    assert executed == ["5->bob"]
    assert second.output == "paid"
    results = second.messages[2].tool_results
    assert [(r.call_id, r.text) for r in results] == [("c1", "100"), ("c2", "sent 5 to bob")]
    assert second.conversation_id == first.conversation_id
    assert check_history(second.messages) == []


async def test_denied_call_gets_failed_result_with_reason() -> None:
    script = Script(calls(("c1", "transfer", '{"amount": 5, "to": "eve"}')), "ok, not paid")
    agent, first = await _deferred_run(script)
    assert first.deferred is not None
    token = first.deferred.calls[0].token
    second = await agent.run(
        history=first.messages, deferred=DeferredResults(approvals={"c1": Deny("suspicious", token)})
    )
    r = second.messages[2].tool_results[0]
    assert r.failed
    assert r.text == "denied: suspicious"
    assert executed == []


async def test_approve_all_uses_the_tokens() -> None:
    script = Script(calls(("c1", "transfer", '{"amount": 1, "to": "a"}')), "done")
    agent, first = await _deferred_run(script)
    assert first.deferred is not None
    second = await agent.run(history=first.messages, deferred=first.deferred.approve_all())
    assert second.output == "done"
    assert executed == ["1->a"]


@pytest.mark.parametrize("case", ["missing", "forged", "other-args", "other-conversation", "bare-bool"])
async def test_bad_tokens_are_rejected(case: str) -> None:
    script = Script(calls(("c1", "transfer", '{"amount": 5, "to": "bob"}')), "never")
    agent, first = await _deferred_run(script)
    assert first.deferred is not None
    token = first.deferred.calls[0].token
    assert token is not None
    history = list(first.messages)
    conversation_id = None
    decision: Approve | bool = Approve(token)
    if case == "missing":
        decision = Approve()
    elif case == "forged":
        decision = Approve(token[:-4] + "AAAA")
    elif case == "other-args":
        # the client tampered with the arguments in the history it holds
        turn = history[-1]
        history[-1] = assistant(
            ToolCall("c1", "transfer", '{"amount": 5000, "to": "bob"}'),
            run_id=turn.run_id,
            conversation_id=turn.conversation_id,
        )
    elif case == "other-conversation":
        conversation_id = new_id()
    else:
        decision = True
    with pytest.raises(ApprovalError) as info:
        await agent.run(
            history=history,
            deferred=DeferredResults(approvals={"c1": decision}),
            conversation_id=conversation_id,
        )
    assert info.value.stage == "approval"
    assert info.value.partial is None
    assert "'c1' (transfer)" in str(info.value)
    assert executed == []


async def test_missing_decision_and_unknown_call_are_rejected() -> None:
    script = Script(calls(("c1", "transfer", '{"amount": 5, "to": "bob"}')))
    agent, first = await _deferred_run(script)
    with pytest.raises(ApprovalError, match="no approve/deny decision"):
        await agent.run(history=first.messages, deferred=DeferredResults())
    with pytest.raises(ApprovalError, match="not pending"):
        await agent.run(history=first.messages, deferred=DeferredResults(approvals={"zz": True}))


async def test_deferred_needs_the_asking_turn_at_the_end() -> None:
    script = Script("plain")
    agent = _agent(script)
    first = await agent.run("hi")
    with pytest.raises(ApprovalError, match="end with the assistant turn"):
        await agent.run(history=first.messages, deferred=DeferredResults())


async def test_without_secret_decisions_need_no_token() -> None:
    script = Script(calls(("c1", "transfer", '{"amount": 2, "to": "x"}')), "done")
    agent, first = await _deferred_run(script, secret=None)
    assert first.deferred is not None
    assert first.deferred.calls[0].token is None
    second = await agent.run(history=first.messages, deferred=DeferredResults(approvals={"c1": True}))
    assert second.output == "done"
    assert executed == ["2->x"]


async def test_external_tool_results_come_back_through_deferred() -> None:
    def pick_file(pattern: str) -> str:
        """Runs in the browser."""
        raise AssertionError("never called on the server")

    script = Script(
        calls(("c1", "pick_file", '{"pattern": "*.txt"}')), lambda m, i: f"got {m[-1].parts[0].text}"
    )
    agent = Agent(script.model, tools=[Tool(pick_file, external=True)], approval_secret=SECRET)
    first = await agent.run("choose")
    assert first.deferred is not None
    ext = first.deferred.external[0]
    assert ext.kind == "external"
    second = await agent.run(
        history=first.messages,
        deferred=DeferredResults(results={"c1": ExternalResult("notes.txt", token=ext.token)}),
    )
    assert second.output == "got notes.txt"
    with pytest.raises(ApprovalError, match="no approval token"):
        await agent.run(history=first.messages, deferred=DeferredResults(results={"c1": "notes.txt"}))


def test_short_secret_rejected() -> None:

    with pytest.raises(UserError, match="16 bytes"):
        Agent(Script().model, approval_secret="short")


@pytest.mark.parametrize("decision", [Approve(123), Deny("no", 7), "approve", None])  # type: ignore[arg-type]
async def test_malformed_decisions_are_rejected_as_approval_errors(decision: object) -> None:
    script = Script(calls(("c1", "transfer", '{"amount": 5, "to": "bob"}')), "never")
    agent, first = await _deferred_run(script)
    with pytest.raises(ApprovalError, match="'c1' \\(transfer\\)") as info:
        await agent.run(history=first.messages, deferred=DeferredResults(approvals={"c1": decision}))  # type: ignore[dict-item]
    assert info.value.stage == "approval"
    assert executed == []


async def test_malformed_deferred_results_are_rejected() -> None:
    script = Script(calls(("c1", "transfer", '{"amount": 5, "to": "bob"}')), "never")
    agent, first = await _deferred_run(script)
    with pytest.raises(UserError, match="DeferredResults, not dict"):
        await agent.run(history=first.messages, deferred={"c1": True})  # type: ignore[arg-type]
    with pytest.raises(ApprovalError, match="approvals must be a mapping"):
        await agent.run(history=first.messages, deferred=DeferredResults(approvals=[("c1", True)]))  # type: ignore[arg-type]
    assert executed == []


@pytest.mark.parametrize("decision", ["approve", None, 1])
async def test_without_secret_only_real_decisions_are_accepted(decision: object) -> None:
    script = Script(calls(("c1", "transfer", '{"amount": 5, "to": "bob"}')), "never")
    agent, first = await _deferred_run(script, secret=None)
    with pytest.raises(ApprovalError, match="must be Approve, Deny, True or False"):
        await agent.run(history=first.messages, deferred=DeferredResults(approvals={"c1": decision}))  # type: ignore[dict-item]
    assert executed == []


async def test_forged_approval_fails_before_instructions_and_repair() -> None:
    script = Script(calls(("c1", "transfer", '{"amount": 5, "to": "bob"}')), "never")
    dynamic_calls: list[str] = []

    def dynamic(ctx: object) -> str:
        dynamic_calls.append("called")
        return "dynamic"

    agent = Agent(
        script.model,
        tools=[Tool(transfer, requires_approval=True)],
        approval_secret=SECRET,
        instructions_fn=dynamic,
    )
    first = await agent.run("pay bob")
    assert dynamic_calls == ["called"]
    assert first.deferred is not None
    token = first.deferred.calls[0].token
    assert token is not None
    with pytest.raises(ApprovalError, match="does not match"):
        await agent.run(
            history=first.messages, deferred=DeferredResults(approvals={"c1": Approve(token[:-4] + "AAAA")})
        )
    assert dynamic_calls == ["called"]  # the forged decision failed before instructions_fn ran
    assert executed == []


async def test_pending_turn_with_duplicate_ids_is_rejected() -> None:
    script = Script(calls(("c1", "transfer", '{"amount": 5, "to": "bob"}')), "never")
    agent, first = await _deferred_run(script, secret=None)
    twice = assistant(
        ToolCall("c1", "transfer", '{"amount": 5, "to": "bob"}'),
        ToolCall("c1", "transfer", '{"amount": 5, "to": "bob"}'),
    )
    with pytest.raises(ApprovalError, match="sharing one"):
        await agent.run(
            history=[*first.messages[:-1], twice], deferred=DeferredResults(approvals={"c1": True})
        )
    assert executed == []
