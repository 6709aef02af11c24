"""Property: every encoder — each provider wire mapping and every ``to_<format>`` converter — takes
every value the contract holds. A tool call's arguments are text the model wrote; when they hold a
number no encoder can write back (``1e999``, a 5,000-digit integer) they are ``truncated`` and
travel as ``{"truncated_args": "<verbatim text>"}``, as cut-off arguments do (ADR 0005, 0021):
never an exception (a 500 from the service's export, a failed request to Anthropic or Gemini)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import tether
from tether import Message, Text, ToolCall, ToolResult, assistant, tool, user
from tether.convert import FORMATS
from tether.models.wire import anthropic, gemini, openai_chat, openai_responses

ENCODERS = {
    "wire.anthropic": anthropic.encode_messages,
    "wire.gemini": gemini.encode_messages,
    "wire.openai_chat": openai_chat.encode_messages,
    "wire.openai_responses": openai_responses.encode_messages,
}

RAW_TEXT = {"pydantic_ai", "langchain"}
"""Peer formats with a field for argument text that is not an object: it goes there verbatim."""

HOSTILE_NUMBERS = [
    "1e999",
    "-1e999",
    "1e99999999999999999999",
    "1" + "0" * 5_000,
    "-" + "9" * 4_300,
    "1" + "0" * 400 + ".5",
]
FINE_NUMBERS = ["0", "-1", "1.5", "1e308", "1e-400", "18446744073709551616", "1" + "0" * 4_000]

words = st.text(alphabet="abcxyz", max_size=4)


def _value(draw: st.DrawFn, hostile: bool, depth: int = 0) -> str:
    """JSON text of a value holding (somewhere) a hostile number when ``hostile``."""
    kind = draw(st.sampled_from(["number", "list", "object"] if depth < 3 else ["number"]))
    if kind == "number":
        return draw(st.sampled_from(HOSTILE_NUMBERS if hostile else FINE_NUMBERS))
    size = draw(st.integers(1, 3))
    at = draw(st.integers(0, size - 1))
    items = [_value(draw, hostile and i == at, depth + 1) for i in range(size)]
    if kind == "list":
        return "[" + ",".join(items) + "]"
    return "{" + ",".join(f"{json.dumps(draw(words) + str(i))}:{item}" for i, item in enumerate(items)) + "}"


@st.composite
def arguments(draw: st.DrawFn) -> str:
    hostile = draw(st.booleans())
    size = draw(st.integers(1, 3))
    at = draw(st.integers(0, size - 1))
    fields = [f'"k{i}":{_value(draw, hostile and i == at)}' for i in range(size)]
    return "{" + ",".join(fields) + "}"


def _history(text: str, result: str) -> list[Message]:
    return [
        user("hi"),
        assistant(ToolCall("c1", "f", text)),
        tool(ToolResult("c1", "f", (Text(result),))),
        assistant("done"),
    ]


@given(text=arguments(), result=arguments())
def test_every_encoder_takes_every_argument_the_contract_holds(text: str, result: str) -> None:
    history = _history(text, result)
    assert tether.loads(tether.dumps(history)) == history  # a value the contract holds
    call = history[1].tool_calls[0]
    wrapped = {"truncated_args": text}
    outputs: dict[str, Any] = {}
    for name, encode in ENCODERS.items():
        outputs[name], report = encode(history)
        assert any(loss.what == "tool call arguments" for loss in report.losses) == call.truncated, name
    for name, fmt in FORMATS.items():
        outputs[name], _ = fmt.dump(history)
    for name, output in outputs.items():
        sent = json.loads(json.dumps(output, allow_nan=False))  # plain JSON: no NaN, no Infinity
        found = _arguments_sent(sent)
        if name == "tether" or (call.truncated and name in RAW_TEXT):
            assert found == [text], name
            continue
        found = [json.loads(f) if isinstance(f, str) else f for f in found]
        if call.truncated:
            assert found == [wrapped], (name, found)
        else:
            assert found == [call.args()], (name, found)


def _arguments_sent(value: Any) -> list[Any]:
    """Every call's arguments in an encoded document as sent (an object, or JSON text)."""
    found: list[Any] = []
    if isinstance(value, dict):
        named = isinstance(value.get("name", value.get("tool_name")), str)
        for key, child in value.items():
            if named and key in ("input", "args", "arguments"):
                found.append(child)
            else:
                found.extend(_arguments_sent(child))
    elif isinstance(value, list):
        for child in value:
            found.extend(_arguments_sent(child))
    return found
