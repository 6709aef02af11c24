"""Losses the Anthropic and Gemini wires report instead of losing silently: the ``synthesized``
flag of results, fields of imported Anthropic blocks tether has no place for (``cache_control``),
a media type an Anthropic URL source cannot carry, Gemini's image/document split, and Gemini calls
exported without an id."""

from __future__ import annotations

from typing import Any

import pytest

from tether import Document, Image, Message, Text, ToolCall, ToolResult, assistant, tool, user
from tether.models.wire import anthropic, gemini


def _what(losses: Any) -> list[tuple[int, int | None, str, str]]:
    return [(x.message, x.part, x.kind, x.what) for x in losses]


@pytest.mark.parametrize("wire", [anthropic, gemini], ids=["anthropic", "gemini"])
def test_a_synthesized_result_is_sent_as_an_ordinary_result_and_reported(wire: Any) -> None:
    call = ToolCall("call_1", "f", "{}")
    synthesized = ToolResult("call_1", "f", (Text("cancelled"),), synthesized=True)
    real = ToolResult("call_1", "f", (Text("cancelled"),))
    sent, report = wire.encode_messages([user("q"), assistant(call), tool(synthesized)])
    plain, plain_report = wire.encode_messages([user("q"), assistant(call), tool(real)])
    assert sent == plain  # the same wire shape as a real result
    assert plain_report.lossless
    assert _what(report.losses) == [(2, 0, "approximated", "synthesized flag")]


def test_anthropic_import_reports_cache_control_and_other_fields_per_block() -> None:
    marker = {"type": "ephemeral", "ttl": "5m"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "long", "cache_control": marker}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "r", "cache_control": marker}],
                },
                {"type": "text", "text": "next", "citations": []},
            ],
        },
    ]
    decoded, report = anthropic.decode_messages(messages)
    assert [m.role for m in decoded] == ["user", "assistant", "tool", "user"]
    assert decoded[0].parts == (Text("long"),)
    assert _what(report.losses) == [
        (0, 0, "dropped", "cache_control"),
        (2, 0, "dropped", "tool result content[0] cache_control"),
        (2, 1, "dropped", "citations"),
    ]
    clean = [{"role": "user", "content": [{"type": "text", "text": "long"}]}]
    assert anthropic.decode_messages(clean)[1].lossless


def test_anthropic_url_sources_report_the_media_type_they_cannot_carry() -> None:
    history = [user(Image(url="https://example.com/a.png", media_type="image/png"))]
    encoded, report = anthropic.encode_messages(history)
    assert encoded[0]["content"] == [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    ]
    assert _what(report.losses) == [(0, 0, "approximated", "media type")]
    assert anthropic.encode_messages([user(Image(url="https://example.com/a.png"))])[1].lossless


def test_gemini_reports_media_that_reads_back_as_the_other_kind() -> None:
    history = [
        user(Document(data=b"png", media_type="image/png"), Image(data=b"%PDF", media_type="application/pdf"))
    ]
    encoded, report = gemini.encode_messages(history)
    assert [p["inlineData"]["mimeType"] for p in encoded[0]["parts"]] == ["image/png", "application/pdf"]
    assert _what(report.losses) == [(0, 0, "approximated", "document"), (0, 1, "approximated", "image")]
    back, _ = gemini.decode_messages(encoded)
    assert [type(p) for p in back[0].parts] == [Image, Document]  # what the report announced


def test_gemini_reports_a_call_exported_without_an_id() -> None:
    history = [user("q"), Message("assistant", (ToolCall(None, "f", "{}"),))]
    encoded, report = gemini.encode_messages(history)
    assert encoded[1]["parts"] == [{"functionCall": {"name": "f", "args": {}}}]
    assert _what(report.losses) == [(1, 0, "approximated", "tool call id")]
    back, _ = gemini.decode_messages(encoded)
    assert back[1].tool_calls[0].id is not None  # import gives it one: the reported difference
