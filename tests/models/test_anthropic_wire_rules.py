"""Anthropic wire rules on built histories: turn merging, what is dropped and reported, ids,
media, per-message caching, and the round trip over generated well-formed histories."""

from __future__ import annotations

from typing import Any

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
from tether.models.wire.anthropic import decode_messages, encode_messages, profile_for


def test_tool_messages_and_the_next_prompt_share_one_user_turn_results_first() -> None:
    calls = [ToolCall("toolu_a", "f", '{"x": 1}'), ToolCall("toolu_b", "g", "{}")]
    history = [
        user("go"),
        assistant(*calls),
        tool(ToolResult("toolu_b", "g", (Text("B"),))),
        tool(ToolResult("toolu_a", "f", (Text("A"),), failed=True)),
        user("and now?"),
    ]
    encoded, report = encode_messages(history)
    assert report.lossless
    assert [m["role"] for m in encoded] == ["user", "assistant", "user"]
    assert encoded[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "B", "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A", "is_error": True},
        {"type": "text", "text": "and now?"},
    ]
    assert encoded[1]["content"][0] == {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {"x": 1}}


def test_system_messages_are_dropped_and_reported() -> None:
    encoded, report = encode_messages([system("be nice"), user("hi")])
    assert encoded == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert [(loss.message, loss.part, loss.kind, loss.what) for loss in report.losses] == [
        (0, None, "dropped", "system message")
    ]


def test_reasoning_replay_follows_the_profile() -> None:
    mine = Reasoning("thinking", signature="sig-1", provider="anthropic")
    redacted = Reasoning(signature="opaque", redacted=True, provider="anthropic")
    theirs = Reasoning("o-series", signature="enc", provider="openai")
    unsigned = Reasoning("no signature", provider="anthropic")
    history = [user("q"), assistant(mine, redacted, theirs, unsigned, "answer", provider="anthropic")]
    encoded, report = encode_messages(history, profile=profile_for("claude-sonnet-4-5"))
    assert encoded[1]["content"] == [
        {"type": "thinking", "thinking": "thinking", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "answer"},
    ]
    assert [(loss.part, loss.what) for loss in report.losses] == [(2, "reasoning"), (3, "reasoning")]
    encoded, report = encode_messages(history, profile=profile_for("claude-3-haiku-20240307"))
    assert [b["type"] for b in encoded[1]["content"]] == ["text"]
    assert len(report.losses) == 4


def test_empty_assistant_turns_are_dropped_and_the_user_turns_around_them_join() -> None:
    history = [user("q"), assistant(""), assistant("", Reasoning("x", provider="openai")), user("again")]
    encoded, report = encode_messages(history)
    # roles still alternate: the two user turns become one, in order
    assert encoded == [
        {"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "again"}]}
    ]
    whats = [(loss.message, loss.kind, loss.what) for loss in report.losses]
    assert (1, "dropped", "assistant message") in whats
    assert (2, "dropped", "assistant message") in whats
    assert (1, "dropped", "empty text") in whats
    assert (3, "approximated", "user message") in whats


def test_foreign_call_ids_are_rewritten_consistently() -> None:
    call = ToolCall("call.1/x", "f", "{}")
    history = [user("q"), assistant(call), tool(ToolResult("call.1/x", "f", (Text("ok"),)))]
    encoded, report = encode_messages(history)
    sent_id = encoded[1]["content"][0]["id"]
    assert sent_id.startswith("call_1_x_")
    assert encoded[2]["content"][0]["tool_use_id"] == sent_id
    assert [loss.what for loss in report.losses] == ["tool call id"]
    anonymous = ToolCall(None, "f", "{}")
    first, _ = encode_messages([assistant(anonymous)])
    second, _ = encode_messages([assistant(ToolCall(None, "f", "{}"))])
    assert first[0]["content"][0]["id"] == second[0]["content"][0]["id"]


def test_media_blocks() -> None:
    parts = (
        Image(data=b"\x89PNG", media_type="image/png"),
        Image(url="https://example.com/cat.png"),
        Document(data=b"%PDF", media_type="application/pdf", title="Report"),
        Document(url="https://example.com/a.pdf"),
        Document(data=b"# Title", media_type="text/markdown"),
    )
    encoded, report = encode_messages([user("look", *parts)])
    assert encoded[0]["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="},
            "title": "Report",
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "# Title"}},
    ]
    assert [(loss.part, loss.kind) for loss in report.losses] == [(5, "approximated")]
    back, _ = decode_messages(encoded)
    assert back[0].parts[:5] == (Text("look"), *parts[:4])


def test_tool_results_with_media_become_block_lists() -> None:
    shot = Image(data=b"\x89PNG", media_type="image/png")
    result = ToolResult("toolu_1", "snap", (Text("here"), shot))
    encoded, report = encode_messages([user("q"), assistant(ToolCall("toolu_1", "snap")), tool(result)])
    assert report.lossless
    block = encoded[2]["content"][0]
    assert block["content"] == [
        {"type": "text", "text": "here"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
    ]
    back, _ = decode_messages(encoded)
    assert back[2].parts == (result,)


def test_encoding_is_cached_per_message() -> None:
    """A growing history re-encodes only its new messages: old entries come from the cache."""
    history = [user("q"), assistant(ToolCall("toolu_1", "f")), tool(ToolResult("toolu_1", "f", (Text("r"),)))]
    cache: PerMessageCache[Any] = PerMessageCache()  # a driver's own
    claude = profile_for("claude-sonnet-4-5")
    first, _ = encode_messages(history, profile=claude, cache=cache)
    longer = [*history, assistant("done"), user("more")]
    second, _ = encode_messages(longer, profile=claude, cache=cache)
    assert second[:2] == first[:2]
    assert second[1]["content"][0] is first[1]["content"][0]  # the same cached block object
    assert second[0]["content"][0] is first[0]["content"][0]
    other_profile, _ = encode_messages(history, profile=profile_for("claude-3-haiku-20240307"), cache=cache)
    assert other_profile[0]["content"][0] is not first[0]["content"][0]
    # without a cache (a format conversion) every call builds fresh blocks
    fresh, _ = encode_messages(history, profile=claude)
    assert fresh == first
    assert fresh[0]["content"][0] is not first[0]["content"][0]


def test_text_signatures_from_gemini_are_reported() -> None:
    _, report = encode_messages([user("q"), assistant(Text("hi", signature="gem"), provider="google")])
    assert [(loss.what, loss.kind) for loss in report.losses] == [("text signature", "approximated")]


def compact(part: Part) -> Part:
    """A call's arguments as the JSON object the wire carries (whitespace is not kept)."""
    if isinstance(part, ToolCall):
        return msgspec.structs.replace(part, arguments=msgspec.json.encode(part.args()).decode())
    return part


def expected_after_round_trip(history: list[Message]) -> list[Message]:
    """What Anthropic can carry of a well-formed history: no system messages, no run stamps,
    consecutive tool messages as one, arguments as JSON objects."""
    out: list[Message] = []
    for message in history:
        if message.role == "system":
            continue
        if message.role == "tool" and out and out[-1].role == "tool":
            out[-1] = Message("tool", out[-1].parts + message.parts)
            continue
        out.append(Message(message.role, tuple(compact(p) for p in message.parts)))
    return out


@given(valid_histories())
def test_well_formed_histories_survive_the_round_trip(history: list[Message]) -> None:
    encoded, report = encode_messages(history)
    back, back_report = decode_messages(encoded)
    assert back_report.lossless
    assert back == expected_after_round_trip(history)
    assert all(loss.what == "system message" for loss in report.losses)
