"""sanitize_history counts characters until a limit could be near, then exact UTF-8 bytes: these
properties hold that shortcut to the exact rule on small limits and random non-ASCII strings."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import (
    Document,
    HistoryTooLarge,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
)
from tether.history import SanitizeLimits, sanitize_history
from tether.history._limits import MESSAGE_FIELDS, part_size, utf8_size
from tether.messages import Role

FIELDS = ("run_id", "conversation_id", "provider", "model", "stop_reason", "response_id")

# 1-, 2-, 3- and 4-byte characters, plus anything (lone surrogates count 3 bytes, as "surrogatepass").
_chars = st.sampled_from("aZ é€😀\u0800\U0010ffff") | st.characters()
_strings = st.text(_chars, max_size=24)
_maybe = st.none() | _strings
_url = _strings.map("https://e.com/".__add__)


def _bytes(s: str | None) -> int:
    return 0 if s is None else len(s.encode("utf-8", "surrogatepass"))


_text = st.builds(Text, _strings, signature=_maybe, provider_id=_maybe)
_image = st.builds(Image, url=_url, media_type=_maybe)
_document = st.builds(Document, url=_url, media_type=_maybe, title=_maybe)
_reasoning = st.builds(Reasoning, _strings, signature=_maybe, provider=_maybe, provider_id=_maybe)
_call = st.builds(ToolCall, _maybe, _strings, _strings | st.just("{}"), signature=_maybe, provider_id=_maybe)
_result = st.builds(
    ToolResult, _strings, _strings, st.lists(_text | _image | _document, max_size=3).map(tuple)
)
_fields = st.fixed_dictionaries({}, optional=dict.fromkeys(FIELDS, _strings))


@st.composite
def _message(draw: st.DrawFn) -> Message:
    kind: Role = draw(st.sampled_from(["user", "assistant", "tool"]))
    fields = draw(_fields)
    if kind == "user":
        parts = draw(st.lists(_text | _image | _document, min_size=1, max_size=3))
    elif kind == "assistant":
        parts = draw(st.lists(_text | _reasoning | _call | _image | _document, min_size=1, max_size=3))
    else:
        parts = draw(st.lists(_result, min_size=1, max_size=3))
    return Message(kind, tuple(parts), **fields)


def _strings_of(part: object) -> int:
    if isinstance(part, Text):
        return _bytes(part.text) + _bytes(part.signature) + _bytes(part.provider_id)
    if isinstance(part, Reasoning):
        return sum(map(_bytes, (part.text, part.signature, part.provider, part.provider_id)))
    if isinstance(part, ToolCall):
        return sum(map(_bytes, (part.id, part.name, part.arguments, part.signature, part.provider_id)))
    assert isinstance(part, Image | Document)
    title = part.title if isinstance(part, Document) else None
    return _bytes(part.url) + _bytes(part.media_type) + _bytes(title)


def _first_violation(history: list[Message], limits: SanitizeLimits) -> tuple[str, str] | None:
    """The limit the exact rule crosses first, and where: every string in UTF-8 bytes."""
    cap, total = limits.max_part_bytes, 0
    for i, m in enumerate(history):
        for k, part in enumerate(m.parts):
            if isinstance(part, ToolResult):
                size = _bytes(part.call_id) + _bytes(part.name)
                if size > cap:
                    return "max_part_bytes", f"message {i}, part {k}"
                for c, item in enumerate(part.content):
                    if _strings_of(item) > cap:
                        return "max_part_bytes", f"message {i}, part {k}, content {c}"
                    size += _strings_of(item)
            else:
                size = _strings_of(part)
                if size > cap:
                    return "max_part_bytes", f"message {i}, part {k}"
            total += size
        for name in FIELDS:
            size = _bytes(getattr(m, name))
            if size > cap:
                return "max_part_bytes", f"message {i}, field {name}"
            total += size
        if total > limits.max_total_bytes:
            return "max_total_bytes", f"message {i}"
    return None


@given(
    st.lists(_message(), min_size=1, max_size=6),
    st.integers(0, 80),
    st.integers(0, 400),
)
def test_limits_are_crossed_exactly_when_the_utf8_bytes_cross_them(
    history: list[Message], max_part: int, max_total: int
) -> None:
    limits = SanitizeLimits(max_part_bytes=max_part, max_total_bytes=max_total)
    expected = _first_violation(history, limits)
    if expected is None:
        sanitize_history(history, limits=limits)
    else:
        with pytest.raises(HistoryTooLarge) as info:
            sanitize_history(history, limits=limits)
        assert (info.value.limit, info.value.where) == expected


def _message_size(m: Message) -> int:
    size = sum(_bytes(getattr(m, name)) for name in FIELDS)
    for part in m.parts:
        if isinstance(part, ToolResult):
            size += _bytes(part.call_id) + _bytes(part.name) + sum(map(_strings_of, part.content))
        else:
            size += _strings_of(part)
    return size


@given(st.lists(_message(), min_size=1, max_size=6))
def test_the_exact_total_is_allowed_and_one_byte_less_is_not(history: list[Message]) -> None:
    sizes = [_message_size(m) for m in history]
    size, cap = sum(sizes), 10**9
    sanitize_history(history, limits=SanitizeLimits(max_part_bytes=cap, max_total_bytes=size))
    if size:
        last = max(i for i, n in enumerate(sizes) if n)
        with pytest.raises(HistoryTooLarge) as info:
            sanitize_history(history, limits=SanitizeLimits(max_part_bytes=cap, max_total_bytes=size - 1))
        assert (info.value.limit, info.value.where) == ("max_total_bytes", f"message {last}")


@given(st.lists(_message(), min_size=1, max_size=6))
def test_truncated_calls_are_the_ones_whose_arguments_are_not_an_object(history: list[Message]) -> None:
    _, report = sanitize_history(history, limits=SanitizeLimits(max_part_bytes=10**6))
    expected = {
        (i, p.id, p.name)
        for i, m in enumerate(history)
        for p in m.parts
        if isinstance(p, ToolCall) and p.truncated
    }
    assert {(r.message, r.call_id, r.name) for r in report.repair.truncated} == expected


# -- every string field of the model counts, including ones added later ---------------------------
def _string_fields(cls: type) -> list[str]:
    """The fields of a struct typed ``str`` or ``str | None``: the strings the limits must count."""
    return [f.name for f in msgspec.structs.fields(cls) if f.type in (str, str | None)]


def _name(value: object) -> str:
    return value.__name__ if isinstance(value, type) else str(value)


_BASES: dict[type, object] = {
    Text: Text("t"),
    ToolCall: ToolCall("c1", "f", "{}"),
    Reasoning: Reasoning("r"),
    ToolResult: ToolResult("c1", "f", (Text("ok"),)),
    Image: Image(url="https://e.com/i.png"),
    Document: Document(url="https://e.com/d.pdf"),
}


@pytest.mark.parametrize(
    ("cls", "name"), [(cls, name) for cls in _BASES for name in _string_fields(cls)], ids=_name
)
def test_part_size_counts_every_string_field_of_every_part_kind(cls: type, name: str) -> None:
    base = _BASES[cls]
    grown = msgspec.structs.replace(base, **{name: "é" * 7})  # type: ignore[type-var]
    before = getattr(base, name) or ""
    assert part_size(grown, len) - part_size(base, len) == 7 - len(before)
    assert part_size(grown, utf8_size) - part_size(base, utf8_size) == 14 - len(before.encode())


def _in_a_history(part: object) -> tuple[list[Message], str]:
    """A history holding ``part`` where its kind may sit, and where the limits name it."""
    call = Message("assistant", (ToolCall("c1", "f"),))
    if isinstance(part, ToolResult):
        return [Message("user", (Text("q"),)), call, Message("tool", (part,))], "message 2, part 0"
    if isinstance(part, ToolCall | Reasoning):
        return [Message("user", (Text("q"),)), Message("assistant", (Text("a"), part))], "message 1, part 1"
    return [Message("user", (Text("q"), part))], "message 0, part 1"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cls", "name"), [(cls, name) for cls in _BASES for name in _string_fields(cls)], ids=_name
)
def test_a_huge_string_in_any_field_of_any_part_is_over_the_part_limit(cls: type, name: str) -> None:
    part = msgspec.structs.replace(_BASES[cls], **{name: "x" * 5000})  # type: ignore[type-var]
    history, where = _in_a_history(part)
    with pytest.raises(HistoryTooLarge) as info:
        sanitize_history(history, limits=SanitizeLimits(max_part_bytes=1000))
    assert (info.value.limit, info.value.where) == ("max_part_bytes", where)
    if isinstance(part, Text | Image | Document):  # the same inside a tool result's content
        result = ToolResult("c1", "f", (Text("ok"), part))
        tail = [Message("assistant", (ToolCall("c1", "f"),)), Message("tool", (result,))]
        with pytest.raises(HistoryTooLarge) as inside:
            sanitize_history(
                [Message("user", (Text("q"),)), *tail], limits=SanitizeLimits(max_part_bytes=1000)
            )
        assert inside.value.where == "message 2, part 0, content 1"


def test_the_message_fields_the_limits_count_are_every_string_field_of_a_message() -> None:
    assert set(MESSAGE_FIELDS) == set(_string_fields(Message))
