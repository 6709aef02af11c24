"""Fuzzing ``loads``: it raises only DecodeError, never hangs, never accepts invalid documents."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tether

from .strategies import histories

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)

KEYS = [
    "role",
    "parts",
    "type",
    "text",
    "callId",
    "id",
    "name",
    "arguments",
    "content",
    "data",
    "url",
    "mediaType",
    "signature",
    "failed",
    "usage",
    "inputTokens",
    "runId",
]
VALUES = [
    None,
    0,
    -1,
    1.5,
    "",
    "user",
    "tool",
    "assistant",
    "system",
    "text",
    "tool-call",
    "tool-result",
    "image",
    "reasoning",
    "document",
    [],
    {},
    True,
    "AAAA",
    "***",
]


def _check(data: bytes | str) -> None:
    try:
        result = tether.loads(data)
    except tether.DecodeError:
        return
    # accepted: it must be a valid history that re-encodes to an equal value
    assert all(isinstance(m, tether.Message) for m in result)
    assert tether.loads(tether.dumps(result)) == result


def _mutate(doc: Any, draw: st.DrawFn) -> Any:
    if isinstance(doc, list) and doc and draw(st.booleans()):
        i = draw(st.integers(0, len(doc) - 1))
        doc[i] = _mutate(doc[i], draw)
        return doc
    if isinstance(doc, dict) and doc and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(doc)))
        action = draw(st.integers(0, 3))
        if action == 0:
            del doc[key]
        elif action == 1:
            doc[key] = draw(st.sampled_from(VALUES))
        elif action == 2:
            doc[draw(st.sampled_from(KEYS))] = draw(st.sampled_from(VALUES))
        else:
            doc[key] = _mutate(doc[key], draw)
        return doc
    return draw(st.sampled_from(VALUES))


@st.composite
def mutated_documents(draw: st.DrawFn) -> bytes:
    history = draw(histories)
    doc = json.loads(tether.dumps(history))
    for _ in range(draw(st.integers(1, 4))):
        doc = _mutate(doc, draw)
    return json.dumps(doc).encode()


@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    _check(data)


@given(json_values)
def test_random_json(value: Any) -> None:
    _check(json.dumps(value))


@settings(max_examples=2000)
@given(mutated_documents())
def test_mutations_of_valid_documents(data: bytes) -> None:
    _check(data)


@given(st.binary(max_size=200))
def test_one_message_random_bytes(data: bytes) -> None:
    with contextlib.suppress(tether.DecodeError):
        tether.loads_message(data)


@pytest.mark.slow
@settings(max_examples=50_000, suppress_health_check=list(HealthCheck))
@given(mutated_documents())
def test_mutations_nightly(data: bytes) -> None:
    _check(data)
