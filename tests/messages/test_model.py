from __future__ import annotations

import dataclasses

import msgspec
import pytest

import tether
from tether import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult, Usage


def test_constructors_accept_lists_and_store_tuples() -> None:
    m = Message("user", [Text("a"), Text("b")])  # type: ignore[arg-type]
    assert type(m.parts) is tuple
    r = ToolResult("c1", "f", ["plain", Text("x")])  # type: ignore[arg-type]
    assert r.content == (Text("plain"), Text("x"))
    assert tether.user("hi", Image(url="https://x/y.png")).parts == (
        Text("hi"),
        Image(url="https://x/y.png"),
    )


def test_values_are_immutable() -> None:
    m = tether.user("hi")
    with pytest.raises(AttributeError):
        m.role = "assistant"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        m.parts[0].text = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        m.parts[0] = Text("x")  # type: ignore[index]
    # hashable and shareable
    assert {m, tether.user("hi")} == {m}


@pytest.mark.parametrize("cls", [Image, Document])
def test_media_needs_exactly_one_of_data_or_url(cls: type[Image] | type[Document]) -> None:
    with pytest.raises(tether.UserError, match="exactly one of data or url"):
        cls()
    with pytest.raises(tether.UserError, match="exactly one of data or url"):
        cls(data=b"x", url="https://a", media_type="image/png")
    with pytest.raises(tether.UserError, match="media_type"):
        cls(data=b"x")
    assert cls(url="https://a").url == "https://a"


@pytest.mark.parametrize(
    ("role", "part"),
    [
        ("user", ToolCall("c", "f")),
        ("user", ToolResult("c", "f")),
        ("tool", Text("x")),
        ("system", Image(url="https://a")),
        ("assistant", ToolResult("c", "f")),
        ("user", Reasoning("r")),
    ],
)
def test_role_part_rules(role: str, part: object) -> None:
    with pytest.raises(tether.UserError, match=r"part 1 \(.*\) is not allowed in a " + role):
        Message(role, (Text("ok") if role != "tool" else ToolResult("c0", "g"), part))  # type: ignore[arg-type]


def test_unknown_role_and_string_parts_rejected() -> None:
    with pytest.raises(tether.UserError, match="unknown role"):
        Message("robot", ())  # type: ignore[arg-type]
    with pytest.raises(tether.UserError, match="not a string"):
        Message("user", "hello")  # type: ignore[arg-type]


def test_tool_call_arguments_verbatim_and_truncation() -> None:
    good = ToolCall("c1", "search", '{"q": "x", "n": 2}')
    assert good.args() == {"q": "x", "n": 2}
    assert not good.truncated
    cut = ToolCall("c2", "search", '{"q": "x", "n"')
    assert cut.truncated
    assert cut.arguments == '{"q": "x", "n"'
    with pytest.raises(tether.DecodeError, match=r"'c2' \(search\)"):
        cut.args()
    assert ToolCall("c3", "f", "[1, 2]").truncated  # valid JSON but not an object
    assert ToolCall("c4", "f", "").truncated


def test_usage_adds_up() -> None:
    a = Usage(1, 2, 3, 4, 5)
    assert a + a == Usage(2, 4, 6, 8, 10)
    assert a.total_tokens == 3


def test_views() -> None:
    m = tether.assistant(Reasoning("think"), "Hello ", "world", ToolCall("c", "f"))
    assert m.text == "Hello world"
    assert m.tool_calls == (ToolCall("c", "f"),)
    t = tether.tool(ToolResult("c", "f", ("a", "b")))
    assert t.tool_results[0].text == "a\nb"


def test_replace_builds_new_message() -> None:
    m = tether.user("hi")
    m2 = msgspec.structs.replace(m, run_id="r1")
    assert m.run_id is None
    assert m2.run_id == "r1"
    assert m2.parts is m.parts


def test_partial_is_frozen() -> None:
    p = tether.Partial((), (), Usage(), 0, 0, "r", "c")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.requests = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    "arguments", ['{"big": 1e400}', '{"big": -1e999}', '{"big": 1' + "0" * 5_000 + "}", '{"a": [1e999]}']
)
def test_arguments_no_encoder_can_write_back_count_as_truncated(arguments: str) -> None:
    """A number past every float or of 4,300 digits and more is JSON no encoder writes back as it
    came (msgspec refuses it, Python turns ``1e400`` into ``inf``, which JSON has no form for): the
    call is ``truncated``, ``args()`` says why, and every wire sends the verbatim text as
    ``truncated_args`` (ADR 0021)."""
    call = ToolCall("c", "f", arguments)
    assert call.truncated
    with pytest.raises(tether.DecodeError, match=r"not a JSON object: .*out of range"):
        call.args()
    fits = ToolCall("c", "f", '{"big": 1e308, "wide": 1' + "0" * 4_000 + "}")
    assert not fits.truncated
    assert fits.args()["wide"] == 10**4_000
