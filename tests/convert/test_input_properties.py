"""Properties: whatever a caller hands a ``from_<format>`` converter, only ``DecodeError`` (the
documented error) escapes; and what imports without error exports to every format without any.

One property per input family: each format's documents (valid exports with one node replaced by
arbitrary JSON, lone surrogates and deep nesting included), the same as JSON text, arbitrary
values at the top level, and tool-argument strings (arbitrary text where a call's arguments go).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import DecodeError, Message, Text, ToolCall, UserError, convert

from .strategies import LANGCHAIN, PLAIN, PYDANTIC_AI, RESPONSES, Shape, conversations

SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]
odd_text = st.one_of(
    st.text(max_size=12),
    st.lists(st.sampled_from([*SURROGATES, "a", "é", '"', "\\", "{", "\x00"]), max_size=8).map("".join),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    odd_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(odd_text, inner, max_size=4),
    max_leaves=12,
)


def _deep(depth: int) -> Any:
    value: Any = "x"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


replacements = st.one_of(
    json_values,
    st.sampled_from(SURROGATES),
    st.integers(min_value=150, max_value=600).map(_deep),  # json.dumps (the test's own) recurses
)

SHAPES: dict[str, Shape] = {
    "tether": PLAIN,
    "openai_chat": PLAIN,
    "openai_responses": RESPONSES,
    "openai_agents": RESPONSES,
    "anthropic": PLAIN,
    "gemini": PLAIN,
    "pydantic_ai": PYDANTIC_AI,
    "langchain": LANGCHAIN,
}


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of every node of a JSON document (the root is ``()``)."""
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_nodes(child, (*path, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out.extend(_nodes(child, (*path, index)))
    return out


def _replace(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(document)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _only_decode_errors(fmt: str, data: object) -> list[Message] | None:
    """Import ``data``: a ``DecodeError`` is the documented outcome for bad input; anything else
    fails the property. What imports must export to every format without an error."""
    loaded: tuple[list[Message], object] | DecodeError
    try:
        loaded = convert.FORMATS[fmt].load(data)
    except DecodeError as exc:
        loaded = exc
    if isinstance(loaded, DecodeError):
        assert str(loaded)
        assert (loaded.path or "").startswith("$"), loaded
        return None
    messages = loaded[0]
    for target in convert.FORMATS.values():
        target.dump(messages)
    return messages


@st.composite
def mutated_documents(draw: st.DrawFn, fmt: str) -> Any:
    """A valid export of ``fmt`` with one node (possibly the root) replaced by an arbitrary value."""
    history = draw(conversations(SHAPES[fmt], max_turns=2))
    document, _ = convert.FORMATS[fmt].dump(history)
    document = json.loads(json.dumps(document))  # plain JSON values, as a client would send
    path = draw(st.sampled_from(_nodes(document)))
    return _replace(document, path, draw(replacements))


FORMATS = sorted(convert.FORMATS)


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_mutated_documents_raise_only_decode_error(fmt: str, data: st.DataObject) -> None:
    _only_decode_errors(fmt, data.draw(mutated_documents(fmt)))


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_mutated_json_text_raises_only_decode_error(fmt: str, data: st.DataObject) -> None:
    document = data.draw(mutated_documents(fmt))
    text = json.dumps(document, ensure_ascii=data.draw(st.booleans()))
    _only_decode_errors(fmt, text if data.draw(st.booleans()) else text.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("fmt", FORMATS)
@given(value=json_values | st.integers(min_value=150, max_value=5_000).map(_deep))
def test_arbitrary_values_raise_only_decode_error(fmt: str, value: Any) -> None:
    _only_decode_errors(fmt, value)


# -- tool-argument strings ------------------------------------------------------------------------

arguments = st.one_of(
    odd_text,
    json_values.map(json.dumps),
    st.integers(min_value=1, max_value=3_000).map(lambda n: '{"a": ' * n + "1" + "}" * n),
    st.integers(min_value=1, max_value=3_000).map(lambda n: "[" * n + "]" * n),
    st.integers(min_value=1, max_value=3_000).map(lambda n: '{"a": ' * n),  # cut mid-stream
)


def _with_arguments(fmt: str, text: str) -> Any:
    if fmt == "openai_chat":
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": text}}
        return [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ]
    if fmt in ("openai_responses", "openai_agents"):
        return [
            {"role": "user", "content": "q"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": text},
        ]
    if fmt == "pydantic_ai":
        call = {"part_kind": "tool-call", "tool_name": "f", "args": text, "tool_call_id": "c1"}
        return [{"kind": "response", "parts": [call]}]
    history = [Message("user", (Text("q"),)), Message("assistant", (ToolCall("c1", "f", text),))]
    document, _ = convert.FORMATS["tether"].dump(history)
    return document


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses", "openai_agents", "pydantic_ai", "tether"])
@given(text=arguments)
def test_tool_argument_strings_raise_only_decode_error(fmt: str, text: str) -> None:
    """Arguments are text the model wrote (any text, cut off, deeply nested): importing them
    raises at most ``DecodeError`` (lone surrogates), and whatever imports keeps the text verbatim
    and exports to every format (arguments that are not a JSON object become ``truncated_args``)."""
    try:
        document = _with_arguments(fmt, text)
    except UserError:  # tether's own export refuses invalid Unicode: give it the parsed form
        document = [
            {"role": "user", "parts": [{"type": "text", "text": "q"}]},
            {
                "role": "assistant",
                "parts": [{"type": "tool-call", "id": "c1", "name": "f", "arguments": text}],
            },
        ]
    messages = _only_decode_errors(fmt, document)
    if messages is not None:
        assert messages[-1].tool_calls[0].arguments == text
