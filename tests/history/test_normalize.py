"""normalize_history, close_calls: examples for every rule of the issue, plus properties."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import (
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    UserError,
    assistant,
    dumps,
    loads,
    tool,
    user,
)
from tether.history import (
    INTERRUPTED_TEXT,
    CallRef,
    HistoryRepair,
    check_history,
    close_calls,
    normalize_history,
    sanitize_history,
)

from .strategies import broken_histories, histories, random_histories, valid_histories


def _call(cid: str | None, name: str = "search", args: str = '{"q": 1}') -> ToolCall:
    return ToolCall(cid, name, args)


def _res(cid: str, name: str = "search", text: str = "ok", failed: bool = False) -> ToolResult:
    return ToolResult(cid, name, (Text(text),), failed=failed)


# -- synthesized results ------------------------------------------------------------------------


def test_dangling_call_gets_the_neutral_synthesized_result_right_after_its_assistant() -> None:
    h = [user("hi"), assistant(_call("c1"), _call("c2", "fetch")), user("next")]
    out, repair = normalize_history(h)
    assert [m.role for m in out] == ["user", "assistant", "tool", "user"]
    assert out[2].parts == (
        ToolResult("c1", "search", (Text(INTERRUPTED_TEXT),), failed=False, synthesized=True),
        ToolResult("c2", "fetch", (Text(INTERRUPTED_TEXT),), failed=False, synthesized=True),
    )
    assert INTERRUPTED_TEXT == "interrupted before execution; no result was produced"
    assert repair.synthesized == (CallRef(1, "c1", "search"), CallRef(1, "c2", "fetch"))
    assert repair.changed


def test_synthesized_results_follow_the_existing_results_of_the_block() -> None:
    h = [user("hi"), assistant(_call("c1"), _call("c2")), tool(_res("c2")), assistant("done")]
    out, repair = normalize_history(h)
    assert out[2] is h[2]
    assert [r.call_id for r in out[3].tool_results] == ["c1"]
    assert out[3].tool_results[0].synthesized
    assert out[4] is h[3]
    assert repair.synthesized == (CallRef(1, "c1", "search"),)


def test_synthesized_messages_carry_no_identity_and_are_deterministic() -> None:
    h = [user("hi", run_id="r", conversation_id="c"), assistant(_call("c1"), run_id="r", conversation_id="c")]
    first, _ = normalize_history(h)
    second, _ = normalize_history(h)
    synth = first[2]
    assert synth.run_id is None
    assert synth.conversation_id is None
    assert synth == second[2]
    assert dumps(first) == dumps(second)


# -- dropped results ----------------------------------------------------------------------------


def test_result_without_call_is_dropped_and_an_emptied_tool_message_disappears() -> None:
    h = [user("hi"), tool(_res("ghost")), assistant("ok")]
    out, repair = normalize_history(h)
    assert out == [h[0], h[2]]
    assert repair.dropped == (CallRef(1, "ghost", "search", "no-call"),)
    assert repair.removed == (1,)


def test_result_placed_before_its_call_is_dropped_and_the_call_synthesized() -> None:
    h = [user("hi"), tool(_res("c1")), assistant(_call("c1"))]
    out, repair = normalize_history(h)
    assert [m.role for m in out] == ["user", "assistant", "tool"]
    assert out[2].tool_results[0].synthesized
    assert repair.dropped == (CallRef(1, "c1", "search", "before-call"),)
    assert repair.synthesized == (CallRef(2, "c1", "search"),)


def test_result_not_right_after_its_call_is_dropped() -> None:
    h = [user("hi"), assistant(_call("c1")), user("interjection"), tool(_res("c1")), assistant("x")]
    out, repair = normalize_history(h)
    assert [m.role for m in out] == ["user", "assistant", "tool", "user", "assistant"]
    assert out[2].tool_results[0].synthesized
    assert repair.dropped == (CallRef(3, "c1", "search", "not-after-call"),)


def test_result_for_an_earlier_turns_call_inside_a_later_block_is_dropped() -> None:
    h = [
        assistant(_call("c1")),
        tool(_res("c1")),
        assistant(_call("c2")),
        tool(_res("c2"), _res("c1", text="late copy")),
    ]
    out, repair = normalize_history(h)
    assert out[3].tool_results == (_res("c2"),)
    assert repair.dropped == (CallRef(3, "c1", "search", "not-after-call"),)


def test_duplicate_results_keep_the_first() -> None:
    first, second = _res("c1", text="first"), _res("c1", text="second")
    h = [user("hi"), assistant(_call("c1")), tool(first), tool(second), assistant("x")]
    out, repair = normalize_history(h)
    assert out == [h[0], h[1], h[2], h[4]]
    assert repair.dropped == (CallRef(3, "c1", "search", "duplicate"),)
    assert repair.removed == (3,)


def test_partially_dropped_tool_message_keeps_its_stamps_and_order() -> None:
    t = tool(_res("c2"), _res("zz"), _res("c1", failed=True), run_id="r9", conversation_id="k9")
    h = [assistant(_call("c1"), _call("c2")), t]
    out, repair = normalize_history(h)
    assert out[1].parts == (_res("c2"), _res("c1", failed=True))
    assert (out[1].run_id, out[1].conversation_id) == ("r9", "k9")
    assert repair.dropped == (CallRef(1, "zz", "search", "no-call"),)
    assert repair.removed == ()


def test_empty_tool_messages_disappear() -> None:
    h = [assistant(_call("c1")), Message("tool"), tool(_res("c1")), Message("tool")]
    out, repair = normalize_history(h)
    assert out == [h[0], h[2]]
    assert repair.removed == (1, 3)
    assert repair.dropped == ()


# -- unpaired and truncated ---------------------------------------------------------------------


def test_calls_without_an_id_pass_through_and_are_reported_every_pass() -> None:
    h = [assistant(_call(None, "calc"), _call("", "calc"), _call("c1")), tool(_res("c1"))]
    out, repair = normalize_history(h)
    assert out == h
    assert not repair.changed
    assert repair.unpaired == (CallRef(0, None, "calc", "no-id"), CallRef(0, "", "calc", "no-id"))
    _again, repair2 = normalize_history(out)
    assert repair2.unpaired == repair.unpaired


def test_a_result_for_an_empty_call_id_is_dropped() -> None:
    h = [assistant(_call("")), tool(_res(""))]
    out, repair = normalize_history(h)
    assert out == [h[0]]
    assert repair.dropped == (CallRef(1, "", "search", "no-call"),)
    assert repair.unpaired == (CallRef(0, "", "search", "no-id"),)


def test_repeated_call_id_in_one_message_is_unpaired_and_answered_once() -> None:
    h = [assistant(_call("c1"), _call("c1", "calc")), tool(_res("c1")), tool(_res("c1", "calc"))]
    out, repair = normalize_history(h)
    assert out == h[:2]
    assert repair.unpaired == (CallRef(0, "c1", "calc", "duplicate-id"),)
    assert repair.dropped == (CallRef(2, "c1", "calc", "duplicate"),)


def test_truncated_arguments_are_detected_kept_verbatim_and_listed_every_pass() -> None:
    broken = '{"q": "unfinished'
    h = [
        user("x"),
        assistant(_call("c1", args=broken), _call("c2", args="[1]")),
        tool(_res("c1"), _res("c2")),
    ]
    out, repair = normalize_history(h)
    assert out == h
    assert out[1].tool_calls[0].arguments == broken
    assert repair.truncated == (CallRef(1, "c1", "search"), CallRef(1, "c2", "search"))
    assert not repair.changed
    _, repair2 = normalize_history(out)
    assert repair2.truncated == repair.truncated


# -- pass-through, identity, fast path ----------------------------------------------------------


def test_content_reasoning_flags_and_stamps_pass_through() -> None:
    a = assistant(
        Reasoning("thinking", signature="opaque==", redacted=True, provider="anthropic"),
        _call("c1", args='{"q": "verbatim  spacing"}'),
        run_id="r1",
        conversation_id="k1",
        model="m",
    )
    t = tool(_res("c1", failed=True), run_id="r1", conversation_id="k1")
    h = [user("hi"), a, t, assistant(_call("c2"))]
    out, _ = normalize_history(h)
    assert out[1] is a
    assert out[2] is t
    assert dumps(out[:4]) == dumps(h)


def test_fast_path_returns_a_new_list_of_the_same_objects_and_an_empty_report() -> None:
    h = [user("hi"), assistant(_call("c1")), tool(_res("c1")), assistant("done")]
    out, repair = normalize_history(h)
    assert out is not h
    assert all(a is b for a, b in zip(out, h, strict=True))
    assert repair == HistoryRepair()
    assert not repair.changed


def test_accepts_tuples_and_iterables() -> None:
    h = (user("hi"), assistant(_call("c1")))
    assert normalize_history(h)[0] == normalize_history(iter(h))[0]


def test_non_messages_are_rejected_with_their_index() -> None:
    with pytest.raises(UserError, match=r"history\[1\] is a dict"):
        normalize_history([user("hi"), {"role": "user"}])  # type: ignore[list-item]


def test_repair_serializes_to_json() -> None:
    h = [tool(_res("ghost")), assistant(_call("c1"), _call(None, "calc", '{"x":'))]
    _, repair = normalize_history(h)
    data = msgspec.json.decode(repair.to_json())
    assert data == {
        "changed": True,
        "synthesized": [{"message": 1, "call_id": "c1", "name": "search", "reason": ""}],
        "dropped": [{"message": 0, "call_id": "ghost", "name": "search", "reason": "no-call"}],
        "removed": [0],
        "truncated": [{"message": 1, "call_id": None, "name": "calc", "reason": ""}],
        "unpaired": [{"message": 1, "call_id": None, "name": "calc", "reason": "no-id"}],
    }


def test_normalize_survives_a_json_round_trip() -> None:
    h = [user("hi"), assistant(_call("c1")), user("x"), tool(_res("c1"))]
    out, _ = normalize_history(h)
    again, repair = normalize_history(loads(dumps(out)))
    assert again == out
    assert not repair.changed


# -- close_calls --------------------------------------------------------------------------------


def test_close_calls_closes_only_unanswered_calls_with_the_given_text() -> None:
    a = assistant(_call("c1"), _call(None), _call("c2", "fetch"), _call("c3"), _call("c2", "fetch"))
    closing = close_calls(
        a, {"c3"}, text="not run (step limit)", failed=True, run_id="r", conversation_id="k"
    )
    assert closing is not None
    assert closing.role == "tool"
    assert (closing.run_id, closing.conversation_id) == ("r", "k")
    assert closing.parts == (
        ToolResult("c1", "search", (Text("not run (step limit)"),), failed=True, synthesized=True),
        ToolResult("c2", "fetch", (Text("not run (step limit)"),), failed=True, synthesized=True),
    )


def test_close_calls_defaults_match_repair_and_returns_none_when_all_answered() -> None:
    a = assistant(_call("c1"))
    closing = close_calls(a)
    out, _ = normalize_history([a])
    assert closing == out[1]
    assert close_calls(a, ["c1"]) is None
    assert close_calls(assistant("no calls")) is None


def test_close_calls_needs_an_assistant_message_and_a_collection_of_ids() -> None:
    with pytest.raises(UserError, match="assistant"):
        close_calls(user("hi"))
    with pytest.raises(UserError, match="not one string"):
        close_calls(assistant(_call("c1")), "c1")


def test_a_history_closed_with_close_calls_needs_no_repair() -> None:
    a = assistant(_call("c1"), _call("c2"))
    h = [user("x"), a, tool(_res("c1"))]
    closing = close_calls(a, {"c1"}, text="outcome unknown; the tool may have run")
    assert closing is not None
    _, repair = normalize_history([*h, closing])
    assert not repair.changed


# -- properties ---------------------------------------------------------------------------------


def _results(history: list[Message]) -> int:
    return sum(len(m.parts) for m in history if m.role == "tool")


@given(histories)
def test_pairing_rule_holds_on_every_output(h: list[Message]) -> None:
    out, repair = normalize_history(h)
    problems = check_history(out)
    assert {p.kind for p in problems} <= {"call-without-id", "duplicate-call-id"}
    assert len(problems) == len(repair.unpaired)


@given(histories)
def test_normalize_is_idempotent_and_deterministic(h: list[Message]) -> None:
    out, repair = normalize_history(h)
    again, repair2 = normalize_history(out)
    assert all(a is b for a, b in zip(again, out, strict=True))
    assert not repair2.changed
    assert [(r.call_id, r.name) for r in repair2.truncated] == [(r.call_id, r.name) for r in repair.truncated]
    assert [(r.call_id, r.reason) for r in repair2.unpaired] == [
        (r.call_id, r.reason) for r in repair.unpaired
    ]
    other, repair3 = normalize_history(list(h))
    assert dumps(other) == dumps(out)
    assert repair3 == repair


@given(histories)
def test_normalize_never_rewrites_content(h: list[Message]) -> None:
    out, repair = normalize_history(h)
    assert [m for m in out if m.role != "tool"] == [m for m in h if m.role != "tool"]
    assert all(
        a is b
        for a, b in zip([m for m in out if m.role != "tool"], [m for m in h if m.role != "tool"], strict=True)
    )
    originals = {id(r) for m in h if m.role == "tool" for r in m.parts}
    for m in out:
        if m.role != "tool":
            continue
        for r in m.tool_results:
            if id(r) not in originals:
                assert r.synthesized
                assert not r.failed
                assert r.text == INTERRUPTED_TEXT
                assert m.run_id is None
                assert m.conversation_id is None
    assert _results(out) == _results(h) - len(repair.dropped) + len(repair.synthesized)


@given(histories)
def test_changed_is_exactly_whether_the_output_differs(h: list[Message]) -> None:
    out, repair = normalize_history(h)
    same = len(out) == len(h) and all(a is b for a, b in zip(out, h, strict=False))
    assert repair.changed is not same
    assert (check_history(h) == []) is (same and not repair.unpaired)


@given(valid_histories())
def test_valid_histories_are_untouched(h: list[Message]) -> None:
    out, repair = normalize_history(h)
    assert all(a is b for a, b in zip(out, h, strict=True))
    assert repair == HistoryRepair()


@given(broken_histories())
def test_broken_histories_report_every_repaired_call(h: list[Message]) -> None:
    _out, repair = normalize_history(h)
    for ref in repair.synthesized:
        assert h[ref.message].role == "assistant"
        assert ref.call_id in {c.id for c in h[ref.message].tool_calls}
    for ref in repair.dropped:
        assert h[ref.message].role == "tool"
        assert ref.call_id in {r.call_id for r in h[ref.message].tool_results}
    for index in repair.removed:
        assert h[index].role == "tool"
    assert repair.to_json() == normalize_history(h)[1].to_json()


@given(random_histories)
def test_truncated_matches_the_model_property(h: list[Message]) -> None:
    _, repair = normalize_history(h)
    expected = [
        (i, c.id) for i, m in enumerate(h) if m.role == "assistant" for c in m.tool_calls if c.truncated
    ]
    assert [(r.message, r.call_id) for r in repair.truncated] == expected


@given(
    st.one_of(st.text(max_size=40), st.from_regex(r'\{"a": ?-?[0-9]{1,3}(\.[0-9]+)?([eE][+-]?[0-9]{1,4})?\}'))
)
def test_truncated_detection_is_exactly_tool_call_truncated(arguments: str) -> None:
    call = ToolCall("c1", "f", arguments)
    h = [assistant(call), tool(_res("c1"))]
    assert bool(normalize_history(h)[1].truncated) is call.truncated
    assert bool(sanitize_history(h)[1].repair.truncated) is call.truncated
