"""Bad input to any ``from_<format>`` is a ``DecodeError`` naming where, never a bare built-in
exception: strings holding lone surrogates (what ``json.loads`` makes of a client's
``"\\ud800"``), anywhere in the document, and nesting 100,000 levels deep, as JSON text or as
already-parsed Python objects."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from tether import DecodeError, convert

LONE = "\ud800"  # what json.loads('"\\ud800"') returns


def _raises_at(fmt: str, data: object, path: str) -> DecodeError:
    with pytest.raises(DecodeError) as caught:
        convert.FORMATS[fmt].load(data)
    assert caught.value.path == path, (fmt, str(caught.value))
    assert "surrogate" in str(caught.value)
    assert path in str(caught.value)
    return caught.value


# (format, document, JSON path of the surrogate): text, tool arguments, nested content parts, ids,
# names, object keys, in every input format.
SURROGATES: list[tuple[str, Any, str]] = [
    ("openai_chat", [{"role": "user", "content": f"hi {LONE}"}], "$[0].content"),
    (
        "openai_chat",
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": f'{{"q": "{LONE}"}}'},
                    }
                ],
            }
        ],
        "$[0].tool_calls[0].function.arguments",
    ),
    (
        "openai_chat",
        [{"role": "tool", "tool_call_id": f"c{LONE}", "content": "ok"}],
        "$[0].tool_call_id",
    ),
    (
        "openai_chat",
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": LONE}]}
            ]
        },
        "$.messages[0].content[1].text",
    ),
    (
        "openai_responses",
        [{"type": "function_call", "call_id": "c1", "name": f"look{LONE}", "arguments": "{}"}],
        "$[0].name",
    ),
    (
        "openai_responses",
        {"instructions": LONE, "input": [{"role": "user", "content": "hi"}]},
        "$.instructions",
    ),
    (
        "openai_agents",
        [{"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": LONE}]}],
        "$[0].output[0].text",
    ),
    (
        "anthropic",
        [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{LONE}", "name": "f", "input": {}}],
            }
        ],
        "$[0].content[0].id",
    ),
    (
        "anthropic",
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": f"deep {LONE}"}],
                    }
                ],
            }
        ],
        "$[0].content[0].content[0].text",
    ),
    (
        "gemini",
        [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"city": {"name": LONE}}}}]}],
        "$[0].parts[0].functionCall.args.city.name",
    ),
    ("gemini", [{"role": "user", "parts": [{"text": "ok", f"k{LONE}": 1}]}], "$[0].parts[0]['k\\ud800']"),
    (
        "pydantic_ai",
        [
            {
                "kind": "response",
                "parts": [{"part_kind": "tool-call", "tool_name": "f", "args": {"x": [LONE]}}],
            }
        ],
        "$[0].parts[0].args.x[0]",
    ),
    (
        "langchain",
        [
            {
                "type": "ai",
                "data": {"content": "", "tool_calls": [{"id": "c", "name": "f", "args": {"a": LONE}}]},
            }
        ],
        "$[0].data.tool_calls[0].args.a",
    ),
    ("tether", [{"role": "user", "parts": [{"type": "text", "text": LONE}]}], "$[0].parts[0].text"),
]


@pytest.mark.parametrize(("fmt", "data", "path"), SURROGATES)
def test_a_lone_surrogate_is_a_decode_error_naming_its_path(fmt: str, data: Any, path: str) -> None:
    _raises_at(fmt, data, path)


@pytest.mark.parametrize(("fmt", "data", "path"), SURROGATES)
def test_a_lone_surrogate_escape_in_json_text_is_located_too(fmt: str, data: Any, path: str) -> None:
    """The same documents as the JSON text a client sends: ``"\\ud800"`` escapes (which JSON's
    grammar allows and no UTF-8 parser takes), as ``str`` and as ``bytes``."""
    text = json.dumps(data)  # ensure_ascii: the surrogate travels as a \\ud800 escape
    assert "\\ud800" in text
    _raises_at(fmt, text, path)
    _raises_at(fmt, text.encode(), path)


@pytest.mark.parametrize("fmt", sorted(convert.FORMATS))
def test_json_text_holding_a_raw_surrogate_is_a_decode_error(fmt: str) -> None:
    with pytest.raises(DecodeError, match="surrogate") as caught:
        convert.FORMATS[fmt].load(f'[{{"role": "user", "content": "{LONE}"}}]')
    assert caught.value.path == "$"


def _nested_object(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        child: dict[str, Any] = {}
        node["a"] = child
        node = child
    return root


def _nested_list(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


# Where a deep value sits in a document each format reads (the decoders would recurse into it or
# hand it to code that does: arguments, tool results, content lists).
def _deep_documents(depth: int) -> dict[str, Any]:
    deep = _nested_object(depth)
    return {
        "openai_chat": [{"role": "user", "content": [{"type": "text", "text": "x", "extra": deep}]}],
        "openai_responses": [{"type": "function_call_output", "call_id": "c", "output": deep}],
        "openai_agents": [{"role": "user", "content": [deep]}],
        "anthropic": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": deep}]}
        ],
        "gemini": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": deep}}]}],
        "pydantic_ai": [
            {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "f", "args": deep}]}
        ],
        "langchain": [
            {"type": "ai", "data": {"content": "", "tool_calls": [{"id": "c", "name": "f", "args": deep}]}}
        ],
        "tether": [{"role": "user", "parts": [{"type": "text", "text": "x"}], "extra": deep}],
    }


@pytest.mark.parametrize("fmt", sorted(convert.FORMATS))
def test_100000_levels_of_parsed_objects_are_a_decode_error(fmt: str) -> None:
    document = _deep_documents(100_000)[fmt]
    with pytest.raises(DecodeError, match="nested deeper") as caught:
        convert.FORMATS[fmt].load(document)
    path = caught.value.path
    assert path is not None
    assert path.startswith("$[0]")
    # the path leads down the deep value to where the limit is crossed
    assert convert.MAX_DEPTH - 10 <= path.count(".a") <= convert.MAX_DEPTH
    with pytest.raises(DecodeError, match="nested deeper"):
        convert.FORMATS[fmt].load(_nested_list(100_000))


@pytest.mark.parametrize("fmt", sorted(convert.FORMATS))
def test_100000_levels_of_json_text_are_a_decode_error(fmt: str) -> None:
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(DecodeError) as caught:
        convert.FORMATS[fmt].load(text)
    assert (caught.value.path or "").startswith("$")  # tether's schema refuses the first array
    nested = '[{"role": "user", "content": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}]"
    with pytest.raises(DecodeError):
        convert.FORMATS[fmt].load(nested.encode())


def test_nesting_at_the_limit_still_converts() -> None:
    """Deep but sane arguments (below ``MAX_DEPTH``) import and export to every format."""
    args = _nested_object(convert.MAX_DEPTH - 10)
    document = [
        {"role": "user", "content": "q"},
        {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "f", "args": args}}]},
    ]
    messages, _ = convert.from_gemini(document)
    assert messages[1].tool_calls[0].args() == args
    for name in convert.FORMATS:
        convert.FORMATS[name].dump(messages)


def test_the_recursion_limit_is_not_what_stops_deep_input() -> None:
    """The gate is iterative: it refuses deep input even with the recursion limit far above it."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, 5_000))
    try:
        with pytest.raises(DecodeError, match="nested deeper"):
            convert.from_gemini(_deep_documents(3_000)["gemini"])
    finally:
        sys.setrecursionlimit(previous)


class _Label(str):
    """A ``str`` subclass, as an application's own string types (an enum member, a tag) are."""


@pytest.mark.parametrize("fmt", sorted(convert.FORMATS))
def test_a_str_subclass_holding_a_lone_surrogate_is_a_decode_error_too(fmt: str) -> None:
    data = [{"role": _Label("user"), "content": _Label(f"hi {LONE}")}]
    _raises_at(fmt, data, "$[0].content")
