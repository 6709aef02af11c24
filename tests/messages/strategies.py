"""Hypothesis strategies for valid tether messages (any role, every part kind)."""

from __future__ import annotations

from hypothesis import strategies as st

from tether import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult, Usage

ids = st.one_of(st.none(), st.text(min_size=1, max_size=12))
opt_text = st.one_of(st.none(), st.text(max_size=20))
texts = st.builds(Text, st.text(max_size=40), signature=opt_text)
media_type = st.sampled_from(["image/png", "image/jpeg", "application/pdf", "text/plain"])


@st.composite
def _media(draw: st.DrawFn, cls: type[Image] | type[Document]) -> Image | Document:
    if draw(st.booleans()):
        return cls(data=draw(st.binary(max_size=64)), media_type=draw(media_type))
    return cls(url=draw(st.text(min_size=1, max_size=30)), media_type=draw(st.none() | media_type))


images = _media(Image)
documents = _media(Document)
result_parts = st.one_of(texts, images, documents)
arguments = st.one_of(
    st.just("{}"),
    st.dictionaries(st.text(max_size=5), st.integers()).map(
        lambda d: "{" + ",".join(f'"{k}":{v}' for k, v in d.items()).replace("\\", "") + "}"
    ),
    st.text(max_size=30),  # truncated / invalid JSON kept verbatim
)
tool_calls = st.builds(
    ToolCall, ids, st.text(min_size=1, max_size=10), arguments, signature=opt_text, provider_id=opt_text
)
tool_results = st.builds(
    ToolResult,
    st.text(min_size=1, max_size=12),
    st.text(min_size=1, max_size=10),
    st.lists(result_parts, max_size=3).map(tuple),
    failed=st.booleans(),
    synthesized=st.booleans(),
)
reasonings = st.builds(
    Reasoning,
    st.text(max_size=40),
    signature=opt_text,
    redacted=st.booleans(),
    provider=opt_text,
    provider_id=opt_text,
)
usages = st.builds(Usage, *(st.integers(min_value=0, max_value=2**40) for _ in range(5)))

_parts_by_role = {
    "system": texts,
    "user": st.one_of(texts, images, documents),
    "assistant": st.one_of(texts, images, documents, tool_calls, reasonings),
    "tool": tool_results,
}


@st.composite
def messages(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    parts = tuple(draw(st.lists(_parts_by_role[role], max_size=4)))
    return Message(
        role,
        parts,
        run_id=draw(opt_text),
        conversation_id=draw(opt_text),
        provider=draw(opt_text) if role == "assistant" else None,
        model=draw(opt_text) if role == "assistant" else None,
        stop_reason=draw(opt_text) if role == "assistant" else None,
        usage=draw(st.none() | usages) if role == "assistant" else None,
        response_id=draw(opt_text) if role == "assistant" else None,
    )


histories = st.lists(messages(), max_size=8)
