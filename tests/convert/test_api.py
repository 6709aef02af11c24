"""The ``tether.convert`` surface: format table, request bodies, loss reports, bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether import (
    DecodeError,
    Document,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    UserError,
    convert,
)


def _history() -> list[Message]:
    return [
        Message("system", (Text("Be brief."),)),
        Message(
            "user",
            (Text("look"), Image(url="https://example.com/a.png"), Document(url="https://example.com/d.pdf")),
        ),
        Message(
            "assistant",
            (
                Reasoning("thinking", signature="c2lnbmVk", provider="anthropic"),
                ToolCall("toolu_1", "zoom", '{"x":1}'),
            ),
            provider="anthropic",
            model="claude-sonnet-4-5",
        ),
        Message("tool", (ToolResult("toolu_1", "zoom", "a cat"),)),
        Message("assistant", (Text("A cat."),)),
    ]


def test_format_table_names_every_format() -> None:
    assert set(convert.FORMATS) == {
        "tether",
        "openai_chat",
        "openai_responses",
        "anthropic",
        "gemini",
        "pydantic_ai",
        "openai_agents",
        "langchain",
    }
    for name, fmt in convert.FORMATS.items():
        assert fmt.name == name
        assert fmt.load is getattr(convert, f"from_{name}")
        assert fmt.dump is getattr(convert, f"to_{name}")


def test_convert_goes_between_formats_and_reports_what_it_lost() -> None:
    chat, _ = convert.to_openai_chat(_history())
    data, report = convert.convert(json.dumps(chat), from_="openai-chat", to="anthropic")
    assert [m["role"] for m in data] == ["user", "assistant", "user", "assistant"]
    assert ("system message", "dropped") in {(loss.what, loss.kind) for loss in report.losses}
    back, _ = convert.from_anthropic(data)
    assert back[0].parts[0] == Text("look")
    with pytest.raises(UserError, match="unknown format 'yaml'"):
        convert.convert([], from_="yaml", to="tether")


def test_signed_thinking_to_openai_chat_is_reported() -> None:
    _, report = convert.to_openai_chat(_history())
    reasoning = [loss for loss in report.losses if loss.what.startswith("reasoning")]
    assert [(loss.message, loss.part, loss.kind) for loss in reasoning] == [(2, 0, "dropped")]


def test_signed_thinking_from_another_provider_is_not_sent_to_responses() -> None:
    items, report = convert.to_openai_responses(_history())
    assert [(loss.message, loss.part, loss.what) for loss in report.losses] == [(2, 0, "reasoning")]
    assert not any(item.get("type") == "reasoning" for item in items)


def test_provider_native_items_are_reported_on_import() -> None:
    messages, report = convert.from_openai_responses(
        {
            "instructions": "Search well.",
            "input": [
                {"role": "user", "content": "news?"},
                {
                    "type": "web_search_call",
                    "id": "ws_1",
                    "status": "completed",
                    "action": {"type": "search"},
                },
                {"role": "assistant", "content": "Nothing new."},
            ],
        }
    )
    assert [m.role for m in messages] == ["system", "user", "assistant"]
    assert messages[0].text == "Search well."
    assert [(loss.message, loss.kind, loss.what) for loss in report.losses] == [
        (1, "dropped", "web_search_call item")
    ]


def test_request_bodies_put_their_system_prompt_first() -> None:
    messages, _ = convert.from_anthropic(
        {"system": [{"type": "text", "text": "Rule one."}], "messages": [{"role": "user", "content": "hi"}]}
    )
    assert [(m.role, m.text) for m in messages] == [("system", "Rule one."), ("user", "hi")]
    messages, _ = convert.from_gemini(
        {
            "systemInstruction": {"parts": [{"text": "Rule two."}]},
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        }
    )
    assert [(m.role, m.text) for m in messages] == [("system", "Rule two."), ("user", "hi")]
    messages, _ = convert.from_openai_chat(
        b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'
    )
    assert [(m.role, m.text) for m in messages] == [("user", "hi")]
    messages, _ = convert.from_openai_responses({"input": "just a string"})
    assert [(m.role, m.text) for m in messages] == [("user", "just a string")]


def test_exports_are_fresh_data() -> None:
    history = _history()
    first, _ = convert.to_openai_chat(history)
    first[1]["content"] = "changed"
    second, _ = convert.to_openai_chat(history)
    assert second[1]["content"] != "changed"


@pytest.mark.parametrize(
    ("fmt", "data", "path"),
    [
        ("openai_responses", "{not json", "$"),
        ("openai_responses", {"model": "gpt-5"}, "$.input"),
        (
            "openai_responses",
            {"input": [{"role": "user", "content": "x"}, {"type": "function_call"}]},
            "$.input[1].call_id",
        ),
        ("openai_chat", {"messages": [{"role": "wizard"}]}, "$.messages[0].role"),
        ("anthropic", {"system": 7, "messages": []}, "$.system"),
        ("anthropic", {"messages": [{"role": "user", "content": [7]}]}, "$.messages[0].content[0]"),
        (
            "gemini",
            {"contents": [{"role": "model", "parts": [{"functionCall": {}}]}]},
            "$.contents[0].parts[0].functionCall.name",
        ),
        ("gemini", {"contents": 3}, "$.contents"),
        (
            "pydantic_ai",
            [{"kind": "response", "parts": [{"part_kind": "tool-call"}]}],
            "$[0].parts[0].tool_name",
        ),
        (
            "pydantic_ai",
            [
                {
                    "kind": "request",
                    "parts": [
                        {
                            "part_kind": "user-prompt",
                            "content": [{"kind": "binary", "data": "%%", "media_type": "image/png"}],
                        }
                    ],
                }
            ],
            "$[0].parts[0].content[0].data",
        ),
        ("pydantic_ai", [{"kind": "nope"}], "$[0].kind"),
        ("openai_agents", [{"type": "reasoning", "summary": []}], "$[0].id"),
        (
            "langchain",
            [{"type": "ai", "data": {"content": "x", "tool_calls": [{"name": "f", "args": 3}]}}],
            "$[0].data.tool_calls[0].args",
        ),
        (
            "langchain",
            [{"type": "human", "data": {"content": [{"type": "image", "base64": "AA=="}]}}],
            "$[0].data.content[0].mime_type",
        ),
        ("langchain", [{"type": "tool", "data": {"content": "x"}}], "$[0].data.tool_call_id"),
        ("langchain", {"type": "human"}, "$"),
        (
            "tether",
            [{"role": "user", "parts": [{"type": "tool-call", "id": "c", "name": "f"}]}],
            "$[0].parts[0]",
        ),
    ],
)
def test_bad_input_names_the_offending_element(fmt: str, data: Any, path: str) -> None:
    with pytest.raises(DecodeError) as info:
        convert.FORMATS[fmt].load(data)
    assert info.value.path == path
    assert path in str(info.value)


def test_report_serializes() -> None:
    _, report = convert.to_anthropic(_history())
    payload = json.loads(report.to_json())
    assert payload["losses"][0]["what"] == "system message"
    assert payload["losses"][0]["message"] == 0
