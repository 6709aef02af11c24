"""Properties: hostile values — numbers no decoder holds (a 5,000-digit integer, ``1e999``), bytes
that are not UTF-8, ``true`` where a count goes, strings where numbers go — handed to every public
decoding entry point (``tether.loads``, ``tether.loads_message``, every ``from_<format>`` as JSON
text, as bytes and as parsed values, ``convert``) raise only tether errors; and whatever is
accepted is a value the contract holds: it reads back from its own JSON, exports to every format
and is stored by a store (ADR 0021)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tether
from tether import DecodeError, MemoryStore, Message, TetherError, convert

from .strategies import conversations
from .test_input_properties import SHAPES, _nodes, _replace

FORMATS = sorted(convert.FORMATS)
MARK = "\ue000hostile\ue000"
"""A placeholder string replaced by a raw hostile token once the document is JSON text."""

# raw JSON tokens (bytes): valid JSON grammar that no decoder holds, or not JSON text at all
HOSTILE_TOKENS: list[bytes] = [
    b"1" + b"0" * 5_000,
    b"-1" + b"0" * 4_400,
    b"1e99999999999999999999",
    b"-1e999",
    b"1e-99999",
    b'"\xff\xfe"',  # a string that is not UTF-8
    b"true",
    b'"12"',
    b"1.5",
    b"-7",
    b"18446744073709551616",
    b"[1e999]",
    b'{"\xff":1' + b"0" * 5_000 + b"}",
]
HOSTILE_KEYS: list[bytes] = [b'"x"', b'"\xff"', b'"content"', b'"usage"', b'"1e999"']

# parsed values a Python caller may hand a converter: JSON has no form for some of them
HOSTILE_VALUES: list[Any] = [
    10**5_000,
    -(10**5_000),
    2**64,
    float("inf"),
    float("-inf"),
    float("nan"),
    True,
    False,
    -1,
    1.5,
    "12",
    b"bytes",
    {"input_tokens": True, "output_tokens": 10**30},
]


def _contract_holds(messages: list[Message]) -> None:
    """What an entry point accepted is a value the contract holds."""
    assert tether.loads(tether.dumps(messages)) == messages
    for target in convert.FORMATS.values():
        exported, _ = target.dump(messages)
        json.dumps(exported, allow_nan=False)  # plain JSON, no NaN/Infinity
    store = MemoryStore()

    async def store_them() -> None:
        cid = await store.create("owner")
        await store.append("owner", cid, messages)
        assert list((await store.load("owner", cid)).messages) == messages

    if messages:
        asyncio.run(store_them())


def _only_tether_errors(load: Any, data: object) -> None:
    outcome: Any
    try:
        outcome = load(data)
    except TetherError as exc:
        outcome = exc
    if isinstance(outcome, TetherError):
        assert isinstance(outcome, DecodeError), f"{type(outcome).__name__} instead of DecodeError: {outcome}"
        assert (outcome.path or "").startswith("$"), outcome
        return
    _contract_holds(outcome if isinstance(outcome, list) else [outcome])


@st.composite
def hostile_texts(draw: st.DrawFn, fmt: str) -> bytes:
    """A valid export of ``fmt`` as JSON text with one value replaced by a hostile token, or one
    object given an extra (unknown or known) key holding one."""
    history = draw(conversations(SHAPES[fmt], max_turns=2))
    document, _ = convert.FORMATS[fmt].dump(history)
    document = json.loads(json.dumps(document))
    path = draw(st.sampled_from(_nodes(document)))
    target: Any = document
    for key in path:
        target = target[key]
    key_mark = "\ue001key\ue001"
    if isinstance(target, dict) and draw(st.booleans()):
        target[key_mark] = MARK
    else:
        document = _replace(document, path, MARK)
    text = json.dumps(document).encode()
    token = draw(st.sampled_from(HOSTILE_TOKENS))
    text = text.replace(json.dumps(MARK).encode(), token)
    return text.replace(json.dumps(key_mark).encode(), draw(st.sampled_from(HOSTILE_KEYS)))


@st.composite
def hostile_documents(draw: st.DrawFn, fmt: str) -> Any:
    """A valid export of ``fmt`` as parsed values with one node replaced by a hostile value."""
    history = draw(conversations(SHAPES[fmt], max_turns=2))
    document, _ = convert.FORMATS[fmt].dump(history)
    document = json.loads(json.dumps(document))
    path = draw(st.sampled_from(_nodes(document)))
    return _replace(document, path, draw(st.sampled_from(HOSTILE_VALUES)))


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_hostile_json_text_raises_only_decode_error(fmt: str, data: st.DataObject) -> None:
    text = data.draw(hostile_texts(fmt))
    load = convert.FORMATS[fmt].load
    _only_tether_errors(lambda d: load(d)[0], text)
    if fmt == "tether":
        _only_tether_errors(tether.loads, text)
        _only_tether_errors(tether.loads, bytearray(text))
    try:
        as_str = text.decode()
    except UnicodeDecodeError:
        return
    _only_tether_errors(lambda d: load(d)[0], as_str)
    _only_tether_errors(lambda d: convert.convert(d, from_=fmt, to="tether")[0] and load(d)[0], as_str)


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_hostile_parsed_values_raise_only_decode_error(fmt: str, data: st.DataObject) -> None:
    document = data.draw(hostile_documents(fmt))
    load = convert.FORMATS[fmt].load
    _only_tether_errors(lambda d: load(d)[0], document)


@given(
    token=st.sampled_from(HOSTILE_TOKENS),
    key=st.sampled_from(HOSTILE_KEYS),
    parts=st.sampled_from([b"", b',"parts":[{"type":"text","text":"a"}]', b',"parts":[]']),
    role=st.sampled_from([b"user", b"assistant", b"tool", b"system"]),
)
def test_one_message_with_a_hostile_field_raises_only_decode_error(
    token: bytes, key: bytes, parts: bytes, role: bytes
) -> None:
    one = b'{"role":"' + role + b'",' + key + b":" + token + parts + b"}"
    _only_tether_errors(tether.loads_message, one)
    _only_tether_errors(tether.loads, b"[" + one + b"]")
    _only_tether_errors(tether.loads, (b"[" + one + b"]").decode("utf-8", "replace"))
