"""Text that is not valid Unicode — a lone surrogate, which is what ``json.loads`` makes of a
client's ``"\\ud800"`` — is a typed error on the way in (``DecodeError`` with the JSON path) and
on the way out (``UserError`` naming the message and the field), never a ``UnicodeEncodeError``."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tether
from tether import (
    Document,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    assistant,
    tool,
    user,
)

from .strategies import histories, messages

LONE = json.loads('"\\ud800"')  # what a JSON parser hands over for the escape "\ud800"
assert len(LONE) == 1
assert 0xD800 <= ord(LONE) <= 0xDFFF


def _doc(message: dict[str, Any]) -> str:
    """One message as JSON text (str) holding the lone surrogate raw, as a server would have it
    after ``json.loads`` of a client's body followed by re-serialisation without ASCII escaping."""
    return json.dumps([message], ensure_ascii=False)


@pytest.mark.parametrize(
    ("message", "path"),
    [
        ({"role": "user", "parts": [{"type": "text", "text": f"a{LONE}b"}]}, "$[0].parts[0].text"),
        ({"role": "assistant", "model": LONE}, "$[0].model"),
        (
            {
                "role": "assistant",
                "parts": [{"type": "tool-call", "id": "c", "name": "f", "arguments": LONE}],
            },
            "$[0].parts[0].arguments",
        ),
        (
            {
                "role": "tool",
                "parts": [
                    {
                        "type": "tool-result",
                        "callId": "c",
                        "name": "f",
                        "content": [{"type": "text", "text": "ok"}, {"type": "text", "text": LONE}],
                    }
                ],
            },
            "$[0].parts[0].content[1].text",
        ),
        ({"role": "user", "parts": [], f"x{LONE}": 1}, "$[0]"),  # in an object key
    ],
)
def test_a_str_holding_a_lone_surrogate_is_a_decode_error_with_its_path(
    message: dict[str, Any], path: str
) -> None:
    text = _doc(message)
    with pytest.raises(tether.DecodeError) as info:
        tether.loads(text)
    assert info.value.path == path
    assert "lone surrogate" in str(info.value)
    assert path in str(info.value)
    with pytest.raises(tether.DecodeError) as one:
        tether.loads_message(text[1:-1])  # the object alone
    assert one.value.path == "$" + path.removeprefix("$[0]")


@pytest.mark.parametrize("text", [LONE, f"[{LONE}]", f'[{{"role": "user"}}, {LONE}]', "\udfff" * 3])
def test_a_lone_surrogate_outside_any_string_is_a_decode_error_at_the_root(text: str) -> None:
    for decode in (tether.loads, tether.loads_message):
        with pytest.raises(tether.DecodeError) as info:
            decode(text)
        assert info.value.path == "$"


def test_every_private_use_character_taken_still_gives_a_decode_error() -> None:
    crowded = "".join(chr(c) for c in range(0xE000, 0xF900))
    text = _doc({"role": "user", "parts": [{"type": "text", "text": crowded + LONE}]})
    with pytest.raises(tether.DecodeError, match="lone surrogate"):
        tether.loads(text)


_FIELDS: list[tuple[Message, str]] = [
    *[
        (Message("assistant", (), **{name: f"x{LONE}"}), "$[1]." + camel)
        for name, camel in [
            ("run_id", "runId"),
            ("conversation_id", "conversationId"),
            ("provider", "provider"),
            ("model", "model"),
            ("stop_reason", "stopReason"),
            ("response_id", "responseId"),
        ]
    ],
    (user(Text(LONE)), "$[1].parts[0].text"),
    (user(Text("t", signature=LONE)), "$[1].parts[0].signature"),
    (user(Text("t", provider_id=LONE)), "$[1].parts[0].providerId"),
    (user(Image(url=LONE)), "$[1].parts[0].url"),
    (user(Image(data=b"x", media_type=LONE)), "$[1].parts[0].mediaType"),
    (user(Document(url="u", title=LONE)), "$[1].parts[0].title"),
    (user(Document(url="u", media_type=LONE)), "$[1].parts[0].mediaType"),
    (assistant(ToolCall(LONE, "f")), "$[1].parts[0].id"),
    (assistant(ToolCall("c", LONE)), "$[1].parts[0].name"),
    (assistant(ToolCall("c", "f", LONE)), "$[1].parts[0].arguments"),
    (assistant(ToolCall("c", "f", signature=LONE)), "$[1].parts[0].signature"),
    (assistant(ToolCall("c", "f", provider_id=LONE)), "$[1].parts[0].providerId"),
    (assistant(Reasoning(LONE)), "$[1].parts[0].text"),
    (assistant(Reasoning("r", signature=LONE)), "$[1].parts[0].signature"),
    (assistant(Reasoning("r", provider=LONE)), "$[1].parts[0].provider"),
    (assistant(Reasoning("r", provider_id=LONE)), "$[1].parts[0].providerId"),
    (tool(ToolResult(LONE, "f")), "$[1].parts[0].callId"),
    (tool(ToolResult("c", LONE)), "$[1].parts[0].name"),
    (tool(ToolResult("c", "f", ("ok", Text(LONE)))), "$[1].parts[0].content[1].text"),
    (tool(ToolResult("c", "f", (Image(url=LONE),))), "$[1].parts[0].content[0].url"),
]


@pytest.mark.parametrize(("message", "path"), _FIELDS, ids=[p for _, p in _FIELDS])
def test_dumps_names_the_message_and_field_holding_a_lone_surrogate(message: Message, path: str) -> None:
    with pytest.raises(tether.UserError) as info:
        tether.dumps([user("fine"), message])
    assert "message 1 holds text that is not valid Unicode" in str(info.value)
    assert path in str(info.value)
    with pytest.raises(tether.UserError, match="the message holds text that is not valid Unicode") as one:
        tether.dumps_message(message)
    assert "$" + path.removeprefix("$[1]") in str(one.value)


def test_dumps_of_a_field_that_is_not_json_at_all_is_a_user_error() -> None:
    with pytest.raises(tether.UserError, match="message 0 cannot be encoded"):
        tether.dumps([Message("user", (Text(object()),))])  # type: ignore[arg-type]


# -- property: only DecodeError escapes, whatever str arrives ----------------------------------------
surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


@st.composite
def documents_with_a_lone_surrogate(draw: st.DrawFn) -> str:
    """A valid history's JSON text (as str) with lone surrogates put anywhere in it."""
    text = json.dumps(json.loads(tether.dumps(draw(histories))), ensure_ascii=False)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(surrogates) + text[at:]
    return text


def _only_decode_error(text: str) -> None:
    for decode in (tether.loads, tether.loads_message):
        with pytest.raises(tether.DecodeError) as info:
            decode(text)
        path = info.value.path
        assert path is not None
        assert path.startswith("$")


@given(documents_with_a_lone_surrogate())
def test_a_document_with_lone_surrogates_anywhere_raises_only_decode_error(text: str) -> None:
    _only_decode_error(text)


@given(st.lists(st.text(max_size=20) | surrogates, min_size=1, max_size=6).map("".join), surrogates)
def test_any_text_with_a_lone_surrogate_raises_only_decode_error(text: str, lone: str) -> None:
    _only_decode_error(text + lone)
    _only_decode_error(lone + text)


@given(messages(), st.data())
def test_a_lone_surrogate_in_any_string_of_a_message_is_named_by_dumps(
    message: Message, data: st.DataObject
) -> None:
    doc = msgspec.to_builtins(message)
    paths: list[tuple[list[str | int], str]] = []

    def walk(value: object, at: list[str | int]) -> None:
        if isinstance(value, str) and at[-1] not in ("type", "role", "data"):  # tags; base64 of bytes
            paths.append((at, value))
        elif isinstance(value, dict):
            for key, item in value.items():  # type: ignore[union-attr]
                walk(item, [*at, key])
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):  # type: ignore[arg-type]
                walk(item, [*at, index])

    walk(doc, ["$"])
    if not paths:
        return
    at, _ = data.draw(st.sampled_from(paths))
    target: Any = doc
    for key in at[1:-1]:
        target = target[key]
    target[at[-1]] = target[at[-1]] + LONE
    broken = msgspec.convert(doc, Message)
    path = "".join(f"[{k}]" if isinstance(k, int) else ("$" if k == "$" else f".{k}") for k in at)
    with pytest.raises(tether.UserError) as info:
        tether.dumps_message(broken)
    assert path in str(info.value)


def test_tool_call_arguments_holding_a_lone_surrogate_are_not_a_json_object() -> None:
    call = ToolCall("c1", "f", '{"x": "\ud800"}')  # what json.loads makes of a client's escape
    assert call.truncated
    with pytest.raises(tether.DecodeError, match="lone surrogate"):
        call.args()


def test_history_checks_report_a_call_with_lone_surrogate_arguments_as_truncated() -> None:
    history = [
        user("hi"),
        assistant(ToolCall("c1", "f", '{"x": "\ud800"}')),
        tool(ToolResult("c1", "f", (Text("ok"),))),
    ]
    assert tether.check_history(history) == []  # paired: only its arguments are unusable
    messages, repair = tether.normalize_history(history)
    assert messages == history
    assert [(r.message, r.call_id) for r in repair.truncated] == [(1, "c1")]
    _, report = tether.sanitize_history(history)
    assert [(r.message, r.call_id) for r in report.repair.truncated] == [(1, "c1")]
