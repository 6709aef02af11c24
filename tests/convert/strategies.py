"""Hypothesis strategies for histories each conversion format can represent exactly.

One conversation builder (user turn, assistant turn with calls, the tool message answering them,
an assistant answer), parameterised per format by what each part may look like there.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import strategies as st

from tether import Document, Image, Message, Part, Reasoning, Text, ToolCall, ToolResult, Usage

ALNUM = string.ascii_letters + string.digits
words = st.text(max_size=20)
nonempty = st.text(min_size=1, max_size=20)
opt_words = st.none() | words
token = st.text(alphabet=ALNUM, min_size=1, max_size=10)
json_args = st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3).map(
    lambda d: msgspec.json.encode(d).decode()
)
png = st.binary(min_size=1, max_size=16)
NOTHING: st.SearchStrategy[None] = st.none()
EMPTY: st.SearchStrategy[dict[str, Any]] = st.just({})
usages = st.builds(Usage, *(st.integers(min_value=0, max_value=10**9) for _ in range(5)))


@dataclass(frozen=True)
class Shape:
    """What a format can carry: strategies for user parts, assistant content parts, tool-result
    content, system messages, calls; plus message metadata."""

    user: st.SearchStrategy[list[Part]]
    content: Callable[[], st.SearchStrategy[list[Part]]]
    results: st.SearchStrategy[tuple[Any, ...]]
    call: Callable[[str], st.SearchStrategy[ToolCall]]
    system: st.SearchStrategy[Message | None] = NOTHING
    metadata: st.SearchStrategy[dict[str, Any]] = EMPTY
    stamps: st.SearchStrategy[dict[str, Any]] = EMPTY
    result_flags: st.SearchStrategy[dict[str, Any]] = EMPTY


@st.composite
def conversations(draw: st.DrawFn, shape: Shape, max_turns: int = 3) -> list[Message]:
    out: list[Message] = []
    system = draw(shape.system)
    if system is not None:
        out.append(system)
    for turn in range(draw(st.integers(min_value=1, max_value=max_turns))):
        out.append(Message("user", tuple(draw(shape.user)), **draw(shape.stamps)))
        content = draw(shape.content())
        calls = [draw(shape.call(f"call{turn}x{i}")) for i in range(draw(st.integers(0, 2)))]
        if not content and not calls:
            content = [Text(draw(nonempty))]
        out.append(Message("assistant", (*content, *calls), **draw(shape.stamps), **draw(shape.metadata)))
        if calls:
            results = tuple(
                ToolResult(c.id or "", c.name, draw(shape.results), **draw(shape.result_flags)) for c in calls
            )
            out.append(Message("tool", results, **draw(shape.stamps)))
            out.append(
                Message("assistant", (Text(draw(nonempty)),), **draw(shape.stamps), **draw(shape.metadata))
            )
    return out


def _calls(
    args: st.SearchStrategy[str], provider_id: st.SearchStrategy[str | None] = NOTHING
) -> Callable[[str], st.SearchStrategy[ToolCall]]:
    return lambda call_id: st.builds(ToolCall, st.just(call_id), token, args, provider_id=provider_id)


# -- OpenAI Responses / Agents SDK sessions ----------------------------------------------------

_responses_media = st.one_of(
    st.builds(lambda d, m: Image(data=d, media_type=m), png, st.sampled_from(["image/png", "image/jpeg"])),
    st.builds(lambda u: Image(url=f"https://example.com/{u}.png"), token),
    st.builds(lambda d, t: Document(data=d, media_type="application/pdf", title=t), png, token),
    st.builds(lambda u, t: Document(url=f"https://example.com/{u}.pdf", title=t), token, st.none() | token),
)
_responses_text = st.builds(Text, words)


@st.composite
def _responses_content(draw: st.DrawFn) -> list[Part]:
    parts: list[Part] = []
    for kind in draw(st.lists(st.sampled_from(["reasoning", "text", "text-id"]), max_size=4)):
        if kind == "reasoning":
            rid = f"rs_{draw(token)}{len(parts)}"
            texts = draw(st.lists(words, min_size=1, max_size=3))
            signature = draw(st.none() | token)
            parts.extend(
                Reasoning(t, signature=signature if i == 0 else None, provider="openai", provider_id=rid)
                for i, t in enumerate(texts)
            )
        else:
            provider_id = f"msg_{draw(token)}" if kind == "text-id" else None
            parts.append(Text(draw(words), provider_id=provider_id))
    return parts


RESPONSES = Shape(
    user=st.lists(_responses_text | _responses_media, max_size=3),
    content=_responses_content,
    results=st.one_of(
        st.builds(lambda t: (Text(t),), words),
        st.lists(_responses_text | _responses_media, min_size=2, max_size=3).map(tuple),
    ),
    call=_calls(json_args, st.none() | st.builds(lambda t: f"fc_{t}", token)),
    system=st.none() | st.builds(lambda t: Message("system", (Text(t),)), words),
)


# -- pydantic-ai -------------------------------------------------------------------------------

_pai_media = st.one_of(
    st.builds(lambda d: Image(data=d, media_type="image/png"), png),
    st.builds(
        lambda u, m: Image(url=f"https://example.com/{u}.png", media_type=m),
        token,
        st.none() | st.just("image/png"),
    ),
    st.builds(lambda d: Document(data=d, media_type="application/pdf"), png),
    st.builds(lambda u: Document(url=f"https://example.com/{u}.pdf"), token),
)
_finish = st.sampled_from([None, "stop", "length", "content_filter", "tool_calls", "error"])
_assistant_meta = st.fixed_dictionaries(
    {
        "provider": opt_words,
        "model": opt_words,
        "stop_reason": _finish,
        "usage": st.none() | usages,
        "response_id": opt_words,
    }
)
_ids = st.fixed_dictionaries({"run_id": st.none() | token, "conversation_id": st.none() | token})


def _pai_content() -> st.SearchStrategy[list[Part]]:
    return st.lists(
        st.one_of(
            st.builds(Text, words, provider_id=st.none() | st.builds(lambda t: f"msg_{t}", token)),
            st.builds(
                Reasoning,
                words,
                signature=opt_words,
                redacted=st.booleans(),
                provider=opt_words,
                provider_id=opt_words,
            ),
        ),
        max_size=3,
    )


PYDANTIC_AI = Shape(
    user=st.one_of(
        st.builds(lambda t: [Text(t)], words),
        st.lists(st.builds(Text, words) | _pai_media, min_size=0, max_size=3).filter(
            lambda ps: len(ps) != 1 or type(ps[0]) is not Text
        ),
    ),
    content=_pai_content,
    results=st.one_of(
        st.builds(lambda t: (Text(t),), nonempty),
        st.lists(st.builds(Text, words) | _pai_media, min_size=2, max_size=3).map(tuple),
    ),
    call=_calls(st.text(max_size=20), st.none() | token),
    system=st.none() | st.builds(lambda t: Message("system", (Text(t),)), words),
    metadata=_assistant_meta,
    stamps=_ids,
    result_flags=st.fixed_dictionaries({"failed": st.booleans(), "synthesized": st.booleans()}),
)


# -- LangChain ---------------------------------------------------------------------------------

_lc_media = st.one_of(
    st.builds(lambda d, m: Image(data=d, media_type=m), png, st.sampled_from(["image/png", "image/webp"])),
    st.builds(
        lambda u, m: Image(url=f"https://example.com/{u}", media_type=m),
        token,
        st.none() | st.just("image/png"),
    ),
    st.builds(lambda d, t: Document(data=d, media_type="application/pdf", title=t), png, st.none() | token),
    st.builds(lambda u, t: Document(url=f"https://example.com/{u}", title=t), token, st.none() | token),
)
_lc_text = st.builds(Text, words, signature=opt_words)


LANGCHAIN = Shape(
    user=st.lists(_lc_text | _lc_media, max_size=3),
    content=lambda: st.lists(
        st.one_of(
            _lc_text,
            _lc_media,
            st.builds(
                Reasoning,
                words,
                signature=opt_words,
                redacted=st.booleans(),
                provider=opt_words,
                provider_id=opt_words,
            ),
        ),
        max_size=3,
    ),
    results=st.lists(_lc_text | _lc_media, max_size=3).map(tuple),
    call=lambda call_id: st.builds(ToolCall, st.just(call_id), token, json_args),
    system=st.none() | st.builds(lambda ps: Message("system", tuple(ps)), st.lists(_lc_text, max_size=2)),
    metadata=_assistant_meta,
    stamps=_ids,
    result_flags=st.fixed_dictionaries({"failed": st.booleans(), "synthesized": st.booleans()}),
)


# -- a conservative shape every provider transcript format holds ------------------------------

PLAIN = Shape(
    user=st.builds(lambda t: [Text(t)], nonempty),
    content=lambda: st.builds(lambda t: [Text(t)], nonempty) | st.just([]),
    results=st.builds(lambda t: (Text(t),), nonempty),
    call=_calls(json_args),
)
