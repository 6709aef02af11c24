"""Gemini wire rules on built histories: turn merging, ids, what is dropped and reported, media
types, per-message caching, and the round trip over generated well-formed histories."""

from __future__ import annotations

import dataclasses
import mimetypes
from typing import Any
from urllib.parse import urlsplit

import msgspec
from hypothesis import given

from history.strategies import valid_histories  # tests/history (tests/ is on sys.path)
from tether import (
    Document,
    Image,
    Message,
    Part,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    assistant,
    system,
    tool,
    user,
)
from tether.models.wire._memo import PerMessageCache
from tether.models.wire.gemini import FOREIGN_CALL_SIGNATURE, decode_messages, encode_messages, profile_for


def test_tool_messages_and_the_next_prompt_share_one_user_turn() -> None:
    calls = [ToolCall("c1", "f", '{"x": 1}', signature="c2ln"), ToolCall("c2", "g")]
    history = [
        system("be brief"),
        user("go"),
        assistant(*calls, provider="google"),
        tool(ToolResult("c2", "g", (Text("B"),))),
        tool(ToolResult("c1", "f", (Text("A"),))),
        user("and now?"),
    ]
    encoded, report = encode_messages(history)
    assert [(loss.message, loss.what) for loss in report.losses] == [(0, "system message")]
    assert [c["role"] for c in encoded] == ["user", "model", "user"]
    assert encoded[1]["parts"] == [
        {"functionCall": {"name": "f", "args": {"x": 1}, "id": "c1"}, "thoughtSignature": "c2ln"},
        {"functionCall": {"name": "g", "args": {}, "id": "c2"}},
    ]
    assert encoded[2]["parts"] == [
        {"functionResponse": {"name": "g", "response": {"output": "B"}, "id": "c2"}},
        {"functionResponse": {"name": "f", "response": {"output": "A"}, "id": "c1"}},
        {"text": "and now?"},
    ]


def test_truncated_arguments_are_wrapped() -> None:
    encoded, report = encode_messages([assistant(ToolCall("c1", "f", '{"city": "Par'))])
    assert encoded[0]["parts"][0]["functionCall"]["args"] == {"truncated_args": '{"city": "Par'}
    assert [loss.what for loss in report.losses] == ["tool call arguments"]


def test_redacted_and_foreign_reasoning_are_dropped_and_reported() -> None:
    history = [
        assistant(
            Reasoning("mine", signature="c2ln", provider="google"),
            Reasoning(signature="opaque", redacted=True, provider="google"),
            Reasoning("theirs", signature="x", provider="anthropic"),
            "answer",
            provider="google",
        )
    ]
    encoded, report = encode_messages(history, profile=profile_for("gemini-3-pro-preview"))
    assert encoded[0]["parts"] == [
        {"text": "mine", "thought": True, "thoughtSignature": "c2ln"},
        {"text": "answer"},
    ]
    assert [(loss.part, loss.what) for loss in report.losses] == [(1, "reasoning"), (2, "reasoning")]


def test_signatures_follow_the_reasoning_replay_policy() -> None:
    """Text and call signatures obey the one replay policy: none for a ``never`` profile, none
    from another provider, and the placeholder stands in for a foreign first call."""
    signed = (Text("t", signature="dGV4dA=="), ToolCall("c1", "f", "{}", signature="Y2FsbA=="))
    google = assistant(*signed, provider="google", model="gemini-2.5-pro")
    never = dataclasses.replace(profile_for("gemini-2.5-pro"), reasoning_replay="never")
    encoded, report = encode_messages([google], profile=never)
    assert all("thoughtSignature" not in part for part in encoded[0]["parts"])
    assert [(loss.part, loss.what) for loss in report.losses] == [(0, "signature"), (1, "signature")]

    same, report = encode_messages([google], profile=profile_for("gemini-2.5-flash"))
    assert [part.get("thoughtSignature") for part in same[0]["parts"]] == ["dGV4dA==", "Y2FsbA=="]
    assert report.lossless

    foreign = assistant(*signed, provider="openai", model="gemini-2.5-pro")
    encoded, report = encode_messages([foreign], profile=profile_for("gemini-2.5-pro"))
    assert encoded[0]["parts"][0] == {"text": "t"}
    assert encoded[0]["parts"][1]["thoughtSignature"] == FOREIGN_CALL_SIGNATURE
    assert ("signature", "dropped") in [(loss.what, loss.kind) for loss in report.losses]


def test_url_media_without_a_type_gets_a_guessed_one() -> None:
    encoded, report = encode_messages(
        [user(Image(url="https://e.com/cat.png"), Document(url="https://e.com/x"))]
    )
    assert encoded[0]["parts"] == [
        {"fileData": {"fileUri": "https://e.com/cat.png", "mimeType": "image/png"}},
        {"fileData": {"fileUri": "https://e.com/x"}},
    ]
    assert [(loss.part, loss.kind) for loss in report.losses] == [(0, "approximated"), (1, "approximated")]


def test_encoding_is_cached_per_message() -> None:
    history = [user("q"), assistant(ToolCall("c1", "f")), tool(ToolResult("c1", "f", (Text("r"),)))]
    cache: PerMessageCache[Any] = PerMessageCache()  # a driver's own
    first, _ = encode_messages(history, cache=cache)
    second, _ = encode_messages([*history, assistant("done")], cache=cache)
    assert second[1]["parts"][0] is first[1]["parts"][0]  # the same cached part object
    assert second[:3] == first
    fresh, _ = encode_messages(history)  # no cache: fresh dicts
    assert fresh == first
    assert fresh[1]["parts"][0] is not first[1]["parts"][0]


def as_sent(part: Part) -> Part:
    """A URL medium as Gemini carries it: no title; the type guessed from the path when missing,
    and a medium with no knowable type comes back as a document."""
    if not isinstance(part, Image | Document) or part.url is None:
        return part
    media_type = part.media_type or mimetypes.guess_type(urlsplit(part.url).path)[0]
    if media_type and media_type.startswith("image/"):
        return Image(url=part.url, media_type=media_type)
    return Document(url=part.url, media_type=media_type)


def compact(part: Part) -> Part:
    if isinstance(part, ToolCall):
        return msgspec.structs.replace(part, arguments=msgspec.json.encode(part.args()).decode())
    return part


def expected_after_round_trip(history: list[Message]) -> list[Message]:
    """What Gemini carries of a well-formed history: no system messages, no stamps, no reasoning
    from other providers, consecutive tool messages as one, arguments as JSON objects, URL media
    as sent."""
    out: list[Message] = []
    for message in history:
        if message.role == "system":
            continue
        if message.role == "tool" and out and out[-1].role == "tool":
            out[-1] = Message("tool", out[-1].parts + message.parts)
            continue
        parts = tuple(as_sent(compact(p)) for p in message.parts if not isinstance(p, Reasoning))
        out.append(Message(message.role, parts))
    return out


@given(valid_histories())
def test_well_formed_histories_survive_the_round_trip(history: list[Message]) -> None:
    encoded, _ = encode_messages(history)
    back, back_report = decode_messages(encoded)
    assert back_report.lossless
    expected = expected_after_round_trip(history)
    assert [m for m in back if m.parts or m.role != "assistant"] == [
        m for m in expected if m.parts or m.role != "assistant"
    ]
