"""Hypothesis strategies for histories: well-formed tool-using conversations, the same deliberately
broken in the ways real histories break, and random message soup with colliding call ids.

Reusable by any test: ``from .strategies import ...`` inside tests/history, or copy the import
pattern. Every strategy yields ``list[Message]``.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tether import (
    Document,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    assistant,
    system,
    tool,
    user,
)

__all__ = [
    "BAD_SCHEMES",
    "BREAKAGES",
    "broken_histories",
    "histories",
    "random_histories",
    "valid_histories",
]

BAD_SCHEMES = ("file:", "data:", "javascript:", "gs:", "FILE:", " JavaScript:", "s3:", "ftp:")
"""URL prefixes sanitize must drop (mixed case and leading whitespace on purpose)."""

_words = st.text(alphabet="abcdefgh ", min_size=1, max_size=12)
_names = st.sampled_from(["search", "fetch", "calc", "weather"])
_good_urls = st.sampled_from(
    ["https://example.com/a.png", "http://example.com/d.pdf", "HTTPS://EXAMPLE.COM/x", " https://e.com/y"]
)
_bad_urls = st.builds(
    lambda s, rest: s + rest, st.sampled_from(BAD_SCHEMES), st.sampled_from(["//x/y", "abc"])
)
_stamp = st.one_of(st.none(), st.sampled_from(["r1", "r2"]))


@st.composite
def _user(draw: st.DrawFn) -> Message:
    parts: list[Text | Image | Document] = [Text(draw(_words))]
    kind = draw(st.sampled_from(["text", "image", "doc", "inline"]))
    if kind == "image":
        parts.append(Image(url=draw(_good_urls)))
    elif kind == "doc":
        parts.append(Document(url=draw(_good_urls), title="t"))
    elif kind == "inline":
        parts.append(Image(data=draw(st.binary(max_size=16)), media_type="image/png"))
    return user(*parts, run_id=draw(_stamp), conversation_id=draw(_stamp))


@st.composite
def valid_histories(draw: st.DrawFn, max_turns: int = 5) -> list[Message]:
    """Histories that satisfy the pairing rule: user turns, tool rounds whose results sit (in any
    order, over one or two tool messages) right after their calls, final answers."""
    out: list[Message] = []
    counter = 0
    if draw(st.booleans()):
        out.append(system(draw(_words)))
    for _ in range(draw(st.integers(0, max_turns))):
        out.append(draw(_user()))
        for _ in range(draw(st.integers(0, 2))):
            calls: list[ToolCall] = []
            for _ in range(draw(st.integers(1, 3))):
                counter += 1
                calls.append(ToolCall(f"call_{counter}", draw(_names), f'{{"q": {counter}}}'))
            head: list[Reasoning | Text] = []
            if draw(st.booleans()):
                head.append(Reasoning(draw(_words), signature="sig", provider="anthropic"))
            stamp = draw(_stamp)
            out.append(
                assistant(*head, *calls, run_id=stamp, conversation_id=stamp, stop_reason="tool_calls")
            )
            results = [
                ToolResult(c.id or "", c.name, (Text(draw(_words)),), failed=draw(st.booleans()))
                for c in calls
            ]
            results = draw(st.permutations(results))
            split = draw(st.integers(1, len(results)))
            out.append(tool(*results[:split], run_id=stamp, conversation_id=stamp))
            if split < len(results):
                out.append(tool(*results[split:], run_id=stamp, conversation_id=stamp))
        if draw(st.booleans()):
            out.append(assistant(draw(_words), stop_reason="stop"))
    return out


BREAKAGES = (
    "drop-result",
    "result-before-call",
    "result-far-from-call",
    "duplicate-result",
    "orphan-result",
    "idless-call",
    "duplicate-call-id",
    "truncated-arguments",
    "system-message",
    "bad-url",
    "bad-url-in-result",
    "empty-message",
    "dangling-end",
)
"""The ways ``broken_histories`` breaks a valid history."""


def _result_slots(history: list[Message]) -> list[tuple[int, int]]:
    return [(i, k) for i, m in enumerate(history) if m.role == "tool" for k in range(len(m.parts))]


def _without(history: list[Message], i: int, k: int) -> tuple[list[Message], ToolResult]:
    m = history[i]
    part = m.parts[k]
    assert isinstance(part, ToolResult)
    rest = m.parts[:k] + m.parts[k + 1 :]
    changed = [*history[:i], Message("tool", rest, run_id=m.run_id, conversation_id=m.conversation_id)]
    return [*changed, *history[i + 1 :]], part


@st.composite
def broken_histories(draw: st.DrawFn) -> list[Message]:
    """A valid history damaged by one to four ``BREAKAGES`` (empty tool messages may remain)."""
    h = draw(valid_histories())
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(BREAKAGES))
        slots = _result_slots(h)
        assistants = [i for i, m in enumerate(h) if m.role == "assistant" and m.tool_calls]
        if kind == "drop-result" and slots:
            h, _ = _without(h, *draw(st.sampled_from(slots)))
        elif kind in ("result-before-call", "result-far-from-call") and slots:
            i, k = draw(st.sampled_from(slots))
            h, part = _without(h, i, k)
            at = draw(st.integers(0, i)) if kind == "result-before-call" else draw(st.integers(i, len(h)))
            h.insert(at, tool(part))
        elif kind == "duplicate-result" and slots:
            i, k = draw(st.sampled_from(slots))
            part = h[i].parts[k]
            assert isinstance(part, ToolResult)
            h.insert(draw(st.integers(i, len(h))), tool(part))
        elif kind == "orphan-result":
            h.insert(draw(st.integers(0, len(h))), tool(ToolResult("ghost", "search", (Text("boo"),))))
        elif kind in ("idless-call", "duplicate-call-id", "truncated-arguments") and assistants:
            i = draw(st.sampled_from(assistants))
            m = h[i]
            first = m.tool_calls[0]
            if kind == "idless-call":
                extra = ToolCall(draw(st.sampled_from([None, ""])), "calc", "{}")
                parts = (*m.parts, extra)
            elif kind == "duplicate-call-id":
                parts = (*m.parts, ToolCall(first.id, "calc", "{}"))
            else:
                parts = tuple(
                    ToolCall(p.id, p.name, p.arguments[: draw(st.integers(0, max(len(p.arguments) - 1, 0)))])
                    if p is first
                    else p
                    for p in m.parts
                )
            h[i] = Message("assistant", parts, run_id=m.run_id, conversation_id=m.conversation_id)
        elif kind == "system-message":
            h.insert(draw(st.integers(0, len(h))), system(draw(_words)))
        elif kind == "bad-url":
            media = draw(st.sampled_from([Image, Document]))
            h.insert(draw(st.integers(0, len(h))), user(draw(_words), media(url=draw(_bad_urls))))
            if draw(st.booleans()):
                h.insert(draw(st.integers(0, len(h))), user(Image(url=draw(_bad_urls))))
        elif kind == "bad-url-in-result" and slots:
            i, k = draw(st.sampled_from(slots))
            m = h[i]
            part = m.parts[k]
            assert isinstance(part, ToolResult)
            bad = ToolResult(part.call_id, part.name, (*part.content, Image(url=draw(_bad_urls))))
            parts = (*m.parts[:k], bad, *m.parts[k + 1 :])
            h[i] = Message("tool", parts, run_id=m.run_id, conversation_id=m.conversation_id)
        elif kind == "empty-message":
            h.insert(
                draw(st.integers(0, len(h))), Message(draw(st.sampled_from(["user", "assistant", "tool"])))
            )
        elif kind == "dangling-end" and assistants:
            h = h[: draw(st.sampled_from(assistants)) + 1]
    return h


_pool_ids = st.sampled_from(["a", "b", "c", ""]) | st.none()


@st.composite
def _soup_message(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["system", "user", "assistant", "assistant", "tool", "tool"]))
    if role == "system":
        return system(draw(_words))
    if role == "user":
        return draw(_user())
    if role == "assistant":
        calls = [
            ToolCall(draw(_pool_ids), draw(_names), draw(st.sampled_from(["{}", '{"a":1}', '{"a":', "[]"])))
            for _ in range(draw(st.integers(0, 3)))
        ]
        text = [Text(draw(_words))] if draw(st.booleans()) else []
        return assistant(*text, *calls, run_id=draw(_stamp))
    results = [
        ToolResult(draw(st.sampled_from(["a", "b", "c", ""])), draw(_names), (Text("r"),))
        for _ in range(draw(st.integers(0, 3)))
    ]
    return tool(*results, run_id=draw(_stamp))


random_histories = st.lists(_soup_message(), max_size=14)
"""Random message soup over a tiny id pool (``a``/``b``/``c``/empty/None): collisions, orphans,
duplicates and misplaced results arise by chance."""

histories = st.one_of(valid_histories(), broken_histories(), random_histories)
"""Any of the above."""
