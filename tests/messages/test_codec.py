from __future__ import annotations

import json

import pytest
from hypothesis import given

import tether
from tether import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult, Usage

from .strategies import histories, messages


@given(histories)
def test_round_trip_is_exact(history: list[Message]) -> None:
    assert tether.loads(tether.dumps(history)) == history


@given(messages())
def test_one_message_round_trip(message: Message) -> None:
    assert tether.loads_message(tether.dumps_message(message)) == message


def test_shape_camel_case_type_discriminator_base64_defaults_omitted() -> None:
    h = [
        tether.user(Image(data=b"\x00\xff", media_type="image/png"), run_id="r", conversation_id="c"),
        tether.assistant(
            Reasoning("t", signature="sig", provider="anthropic"),
            ToolCall("c1", "f", '{"a":'),
            stop_reason="tool_calls",
            usage=Usage(input_tokens=3),
            response_id="resp",
        ),
        tether.tool(ToolResult("c1", "f", ("done",), failed=True)),
    ]
    doc = json.loads(tether.dumps(h))
    assert doc == [
        {
            "role": "user",
            "parts": [{"type": "image", "data": "AP8=", "mediaType": "image/png"}],
            "runId": "r",
            "conversationId": "c",
        },
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "text": "t", "signature": "sig", "provider": "anthropic"},
                {"type": "tool-call", "id": "c1", "name": "f", "arguments": '{"a":'},
            ],
            "stopReason": "tool_calls",
            "usage": {"inputTokens": 3},
            "responseId": "resp",
        },
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool-result",
                    "callId": "c1",
                    "name": "f",
                    "content": [{"type": "text", "text": "done"}],
                    "failed": True,
                }
            ],
        },
    ]


def test_unknown_fields_are_ignored() -> None:
    data = b'[{"role":"user","future":1,"parts":[{"type":"text","text":"hi","lang":"en"}]}]'
    assert tether.loads(data) == [tether.user("hi")]


@pytest.mark.parametrize(
    "data",
    [
        '[{"role":"user","parts":[{"type":"text","text":"a"}]},{"role":"user","content":"hi"}]',
        b'[{"role":"user","parts":[{"type":"text","text":"a"}]},{"role":"user","content":[{"type":"text","text":"hi"}]}]',
        memoryview(
            b'[{"role":"system","parts":[{"type":"text","text":"a"}]},{"role":"assistant","content":null}]'
        ),
    ],
)
def test_another_formats_message_is_refused_not_read_as_empty(data: str | bytes | memoryview) -> None:
    with pytest.raises(tether.DecodeError, match=r'message 1 has "content".*tether.convert') as info:
        tether.loads(data)
    assert info.value.path == "$[1].content"
    with pytest.raises(tether.DecodeError, match=r'the message has "content"') as one:
        tether.loads_message('{"role":"user","content":"hi"}')
    assert one.value.path == "$.content"


def test_a_message_with_no_parts_still_decodes() -> None:
    empty = tether.Message("assistant", stop_reason="length")
    assert tether.dumps([empty]) == b'[{"role":"assistant","stopReason":"length"}]'  # parts omitted
    assert tether.loads(tether.dumps([empty])) == [empty]
    both = b'{"role":"assistant","parts":[],"content":"x"}'  # parts given: content is an unknown field
    assert tether.loads_message(both) == tether.Message("assistant")


HOSTILE_UNKNOWN_FIELDS = [
    b'"x":1' + b"0" * 5_000,  # more digits than any decoder turns into a number
    b'"x":1e99999999999999999999',  # past every float
    b'"x":-1e999',
    b'"\xff\xfe":1',  # a key that is not UTF-8
    b'"x":{"y":[1' + b"0" * 5_000 + b',"\xff"]}',
]


@pytest.mark.parametrize("field", HOSTILE_UNKNOWN_FIELDS)
@pytest.mark.parametrize("parts", [b"", b',"parts":[{"type":"text","text":"a"}]'])
def test_an_unknown_field_is_skipped_alike_with_and_without_parts(field: bytes, parts: bytes) -> None:
    """Unknown fields are skipped unread (ADR 0001: the contract only gains fields), whatever they
    hold: a message without parts (looked at twice, to refuse "content") is read as one with
    parts, never with msgspec's own error escaping (ADR 0021)."""
    one = b'{"role":"user",' + field + parts + b"}"
    expected = Message("user", (Text("a"),) if parts else ())
    assert tether.loads(b"[" + one + b"]") == [expected]
    assert tether.loads_message(one) == expected
    with pytest.raises(tether.DecodeError, match=r'message 0 has "content"') as info:
        tether.loads(b'[{"role":"user",' + field + b',"content":"hi"}]')
    assert info.value.path == "$[0].content"


def test_accepts_str_and_memoryview() -> None:
    data = tether.dumps([tether.user("hi")])
    assert tether.loads(data.decode()) == tether.loads(memoryview(data))


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [
        (
            b'[{"role":"user"},{"role":"user","parts":[{"type":"text","text":"a"},{"type":"video"}]}]',
            "$[1].parts[1].type",
            "'video'",
        ),
        (b'[{"role":"user","parts":[{"type":"text"}]}]', "$[0].parts[0]", "missing required field `text`"),
        (b'[{"role":"user","parts":[{"type":"text","text":5}]}]', "$[0].parts[0].text", "Expected `str`"),
        (b'[{"role":"wizard"}]', "$[0].role", "'wizard'"),
        (b'[{"parts":[]}]', "$[0]", "`role`"),
        (
            b'[{"role":"user","parts":[{"type":"tool-call","id":"c","name":"f"}]}]',
            "$[0].parts[0]",
            "not allowed in a user message",
        ),
        (
            b'[{"role":"user","parts":[{"type":"image","mediaType":"image/png"}]}]',
            "$[0].parts[0]",
            "exactly one of data or url",
        ),
        (
            b'[{"role":"user","parts":[{"type":"image","data":"***","mediaType":"image/png"}]}]',
            "$[0].parts[0].data",
            "base64",
        ),
        (b'{"role":"user"}', "$", "Expected `array`"),
        (b'[{"role":"assistant","usage":{"inputTokens":"x"}}]', "$[0].usage.inputTokens", "Expected `int`"),
        (b'[{"role":', "$", "not valid JSON"),
        (b"[1,", "$[0]", "Expected `object`"),
        (b"", "$", "not valid JSON"),
    ],
)
def test_bad_documents_name_the_path(data: bytes, path: str, fragment: str) -> None:
    with pytest.raises(tether.DecodeError) as info:
        tether.loads(data)
    assert info.value.path == path
    assert fragment in str(info.value)
    assert path in str(info.value)


def test_deep_nesting_and_huge_strings() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    with pytest.raises(tether.DecodeError):
        tether.loads(deep)
    deep_field = b'[{"role":"user","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}]"
    with pytest.raises(tether.DecodeError):
        tether.loads(deep_field)
    big = "é" * 5_000_000
    assert tether.loads(tether.dumps([tether.user(big)]))[0].text == big


def test_not_bytes_at_all() -> None:
    with pytest.raises(tether.DecodeError):
        tether.loads(12)  # type: ignore[arg-type]


def test_document_fields() -> None:
    d = Document(data=b"%PDF", media_type="application/pdf", title="a.pdf")
    assert tether.loads_message(tether.dumps_message(tether.user(d))).parts == (d,)
    assert Text("x").signature is None


def test_text_that_is_not_unicode_is_a_user_error_naming_the_message() -> None:
    bad = [tether.user("fine"), tether.assistant("half a pair: \ud800")]
    with pytest.raises(tether.UserError, match="message 1 holds text that is not valid Unicode"):
        tether.dumps(bad)
    with pytest.raises(tether.UserError, match="not valid Unicode"):
        tether.dumps_message(bad[1])
    # JSON text with a lone surrogate escape is refused on the way in too
    with pytest.raises(tether.DecodeError):
        tether.loads(b'[{"role":"user","parts":[{"type":"text","text":"a\\ud800b"}]}]')
