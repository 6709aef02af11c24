"""OpenAI Chat wire contracts: round trips, streaming == non-streamed, shared wire rules, errors,
and the per-message encoding cache."""

from __future__ import annotations

import gc
import itertools
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tether import (
    DecodeError,
    Document,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    assistant,
    convert,
    system,
    tool,
    user,
)
from tether.models import ModelResponse, Profile, ReasoningDelta, TextDelta, ToolCallDelta
from tether.models.wire._documented import documented_loss
from tether.models.wire._memo import PerMessageCache
from tether.models.wire.openai_chat import (
    StreamAccumulator,
    decode_messages,
    decode_response,
    encode_messages,
    normalize_stop_reason,
)

from .test_openai_chat_wire import load_cassette

words = st.text(min_size=1, max_size=30)
json_args = st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=6), max_size=3).map(
    lambda d: json.dumps(d)
)


COMPATIBILITY = (Path(__file__).resolve().parents[2] / "docs" / "compatibility.md").read_text(
    encoding="utf-8"
)


@st.composite
def chat_histories(draw: st.DrawFn) -> list[Message]:
    """Histories OpenAI Chat can represent exactly: text/images/PDFs from the user, text and calls
    from the assistant, text tool results answering those calls."""
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(system(draw(words)))
    for turn in range(draw(st.integers(1, 4))):
        media = draw(
            st.lists(
                st.one_of(
                    words.map(Text),
                    st.binary(max_size=24).map(lambda b: Image(data=b, media_type="image/png")),
                    st.builds(Image, url=st.just("https://example.com/a.png")),
                    st.binary(max_size=24).map(
                        lambda b: Document(data=b, media_type="application/pdf", title="a.pdf")
                    ),
                ),
                min_size=1,
                max_size=3,
            )
        )
        out.append(user(*media))
        names = draw(st.lists(st.sampled_from(["search", "fetch", "sum"]), max_size=3))
        calls = [ToolCall(f"call_{turn}_{i}", n, draw(json_args)) for i, n in enumerate(names)]
        texts = draw(st.lists(words, max_size=2))
        if calls or texts:
            out.append(assistant(*texts, *calls))
        if calls:
            results = [
                ToolResult(
                    c.id or "", c.name, tuple(Text(t) for t in draw(st.lists(words, min_size=1, max_size=2)))
                )
                for c in calls
            ]
            out.append(tool(*results))
    return out


@given(chat_histories())
def test_representable_histories_round_trip(history: list[Message]) -> None:
    encoded, report = encode_messages(history)
    assert report.lossless
    decoded, back = decode_messages(json.loads(json.dumps(encoded)))
    assert back.lossless
    assert decoded == history


any_part = st.one_of(
    st.builds(Text, st.text(max_size=8), signature=st.none() | st.just("sig")),
    st.builds(Image, data=st.binary(max_size=8), media_type=st.just("image/png")),
    st.builds(Image, url=st.just("https://x/i.png")),
    st.builds(
        Document,
        data=st.binary(max_size=8),
        media_type=st.sampled_from(["application/pdf", "text/plain", "x/y"]),
    ),
    st.builds(Document, url=st.just("https://x/d.pdf")),
    st.builds(
        ToolCall,
        st.none() | st.just("c1"),
        st.just("f"),
        st.sampled_from(["{}", "{bad", "[]"]),
        signature=st.none() | st.just("s"),
        provider_id=st.none() | st.just("fc_1"),
    ),
    st.builds(
        Reasoning,
        st.text(max_size=8),
        signature=st.none() | st.just("sig"),
        provider=st.sampled_from([None, "openai", "anthropic"]),
    ),
)
any_result = st.builds(
    ToolResult,
    st.just("c1"),
    st.just("f"),
    st.lists(
        st.one_of(st.builds(Text, st.text(max_size=4)), st.builds(Image, url=st.just("https://x/i.png"))),
        max_size=2,
    ).map(tuple),
    failed=st.booleans(),
    synthesized=st.booleans(),
)
_ALLOWED = {
    "system": (Text,),
    "user": (Text, Image, Document),
    "assistant": (Text, Image, Document, ToolCall, Reasoning),
}


@st.composite
def any_message(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    if role == "tool":
        return Message("tool", tuple(draw(st.lists(any_result, min_size=1, max_size=2))))
    parts = draw(st.lists(any_part.filter(lambda p: isinstance(p, _ALLOWED[role])), max_size=4))
    return Message(role, tuple(parts))


histories = st.lists(any_message(), max_size=6)


@given(histories)
def test_any_history_encodes_to_json_and_reports_what_it_cannot_carry(history: list[Message]) -> None:
    encoded, report = encode_messages(history, profile=Profile("openai"))
    json.dumps(encoded)
    for mi, message in enumerate(history):
        for pi, part in enumerate(message.parts):
            if isinstance(part, Reasoning):
                assert any(loss.message == mi and loss.part == pi for loss in report.losses)
            if isinstance(part, ToolResult) and (part.failed or part.synthesized):
                assert any(loss.message == mi and loss.part == pi for loss in report.losses)


def test_truncated_arguments_are_wrapped_deterministically_and_reported() -> None:
    call = ToolCall("call_1", "search", '{"q": "unfinish')
    history = [user("hi"), assistant(call), tool(ToolResult("call_1", "search", "partial", synthesized=True))]
    encoded, report = encode_messages(history)
    sent = encoded[1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {"truncated_args": '{"q": "unfinish'}
    assert (
        encode_messages([assistant(ToolCall("call_1", "search", '{"q": "unfinish'))])[0][0]["tool_calls"][0][
            "function"
        ]["arguments"]
        == sent
    )
    # the synthesized result goes out as an ordinary result: same shape, flag only reported
    assert encoded[2] == {"role": "tool", "tool_call_id": "call_1", "content": "partial"}
    assert {(loss.message, loss.what) for loss in report.losses} == {
        (1, "tool call arguments"),
        (2, "synthesized flag"),
    }


def test_reasoning_is_dropped_and_reported_never_sent_as_text() -> None:
    message = assistant(
        Reasoning("thinking", signature="sig", provider="anthropic"), "answer", provider="anthropic"
    )
    encoded, report = encode_messages([message], profile=Profile("openai"))
    assert encoded == [{"role": "assistant", "content": "answer"}]
    assert [(loss.message, loss.part, loss.kind, loss.what) for loss in report.losses] == [
        (0, 0, "dropped", "reasoning")
    ]


def test_reasoning_is_replayed_only_where_the_profile_accepts_it() -> None:
    message = assistant(Reasoning("chain", provider="vllm"), "x", provider="vllm", model="qwen3-8b")
    accepting = Profile("vllm", family="qwen3", reasoning_replay="same-family")
    encoded, report = encode_messages([message], profile=accepting)
    assert encoded[0]["reasoning_content"] == "chain"
    assert report.lossless
    other_family = Profile("vllm", family="llama", reasoning_replay="same-family")
    encoded, report = encode_messages([message], profile=other_family)
    assert "reasoning_content" not in encoded[0]
    assert not report.lossless


def test_encoding_is_cached_per_message_and_per_profile() -> None:
    history = [user("a"), assistant("b")]
    openai = Profile("openai")
    cache: PerMessageCache[Any] = PerMessageCache()  # a driver's own
    first, _ = encode_messages(history, profile=openai, cache=cache)
    second, _ = encode_messages([*history, user("c")], profile=openai, cache=cache)
    assert first[0] is second[0]
    assert first[1] is second[1]
    other, _ = encode_messages(history, profile=Profile("groq"), cache=cache)
    assert other[0] == first[0]
    assert other[0] is not first[0]
    # exporting (no profile) hands out fresh dicts the caller may change
    exported, _ = encode_messages(history)
    exported[0]["content"] = "changed"
    assert encode_messages(history)[0][0]["content"] == "a"


@pytest.mark.parametrize(
    ("items", "path"),
    [
        ({"role": "user"}, "$"),
        ([{"role": "user", "content": "a"}, "x"], "$[1]"),
        ([{"role": "narrator", "content": "a"}], "$[0].role"),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": None}]}],
            "$[0].tool_calls[0].function",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}],
            "$[0].tool_calls[0].function.name",
        ),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png,xx"}}]}],
            "$[0].content[0].image_url.url",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "file", "file": {"file_data": "data:application/pdf;base64,@@"}}],
                }
            ],
            "$[0].content[0].file.file_data",
        ),
        ([{"role": "tool", "content": "x"}], "$[0].tool_call_id"),
        (
            [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "https://x"}}]}],
            "$[0].content",
        ),
    ],
)
def test_malformed_transcripts_name_the_offending_element(items: Any, path: str) -> None:
    with pytest.raises(DecodeError) as error:
        decode_messages(items)
    assert error.value.path == path
    assert path in str(error.value)


def test_transcript_import_reports_what_tether_cannot_hold() -> None:
    items = [
        {"role": "developer", "content": "be brief"},
        {
            "role": "user",
            "name": "ann",
            "content": [{"type": "input_audio", "input_audio": {}}, {"type": "text", "text": "hi"}],
        },
        {
            "role": "assistant",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "zzz", "content": "ok"},
    ]
    messages, report = decode_messages(items)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[2].tool_calls[0].id is None
    assert {(loss.message, loss.part, loss.what) for loss in report.losses} == {
        (0, None, "developer role"),
        (1, 0, "input_audio content"),
        (1, None, "participant name"),
        (2, None, "tool call id"),
        (3, None, "tool name"),
    }


def test_consecutive_tool_entries_become_one_tool_message() -> None:
    items = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
    ]
    messages, report = decode_messages(items)
    assert report.lossless
    assert messages[2] == tool(ToolResult("a", "f", "1"), ToolResult("b", "g", "2"))
    assert encode_messages(messages)[0][2:] == [
        {
            **i,
        }
        for i in items[2:]
    ]


@pytest.mark.parametrize(
    ("raw", "calls", "expected"),
    [
        ("stop", False, "stop"),
        ("stop", True, "tool_calls"),
        ("length", False, "length"),
        ("function_call", True, "tool_calls"),
        (None, False, "stop"),
        ("weird", False, "weird"),
        ("content_filter", False, "content_filter"),
    ],
)
def test_stop_reasons_are_normalized(raw: str | None, calls: bool, expected: str) -> None:
    assert normalize_stop_reason(raw, has_tool_calls=calls) == expected


# -- streaming == non-streamed -------------------------------------------------------------------
@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    style = draw(st.sampled_from(["plain", "field", "think"]))
    text = draw(st.text(max_size=40))
    if style == "field":
        message["reasoning_content"] = draw(words)
    if style == "think":
        text = f"<think>{draw(st.text(max_size=20).filter(lambda t: '</think>' not in t))}</think>{text}"
    message["content"] = text or None
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": draw(st.sampled_from(["a", "bb"])), "arguments": draw(json_args)},
        }
        for i in range(draw(st.integers(0, 2)))
    ]
    if calls:
        message["tool_calls"] = calls
    usage = {
        "prompt_tokens": draw(st.integers(0, 99)),
        "completion_tokens": draw(st.integers(0, 99)),
        "prompt_tokens_details": {"cached_tokens": 3},
    }
    finish = "tool_calls" if calls else draw(st.sampled_from(["stop", "length"]))
    return {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": usage,
    }


def _pieces(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
    edges = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges) if b > a]


@st.composite
def streamed(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    body = draw(bodies())
    message = body["choices"][0]["message"]

    def chunk(delta, finish=None):
        return {
            "id": "chatcmpl-1",
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    for piece in _pieces(draw, message.get("reasoning_content") or ""):
        chunks.append(chunk({"reasoning_content": piece}))
    for piece in _pieces(draw, message.get("content") or ""):
        chunks.append(chunk({"content": piece}))
    for i, call in enumerate(message.get("tool_calls") or []):
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        for piece in _pieces(draw, call["function"]["arguments"]):
            chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, body["choices"][0]["finish_reason"]))
    chunks.append({"id": "chatcmpl-1", "model": "m", "choices": [], "usage": body["usage"]})
    return body, chunks


@given(streamed())
def test_streamed_chunks_assemble_exactly_the_non_streamed_response(
    case: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    body, chunks = case
    accumulator = StreamAccumulator(provider="p")
    deltas = [event for chunk in chunks for event in accumulator.feed(chunk)]
    expected = decode_response(body, provider="p")
    assert accumulator.finished
    assert accumulator.result() == expected
    # the deltas rebuild every part at the index it has in the final message
    rebuilt: dict[int, str] = {}
    for delta in deltas:
        assert isinstance(delta, (TextDelta, ReasoningDelta, ToolCallDelta))
        text = delta.arguments if isinstance(delta, ToolCallDelta) else delta.text
        rebuilt[delta.index] = rebuilt.get(delta.index, "") + text
    for index, part in enumerate(expected.message.parts):
        if isinstance(part, (Text, Reasoning)):
            assert rebuilt.get(index, "") == part.text
        elif isinstance(part, ToolCall):
            assert rebuilt[index] == part.arguments


def test_response_without_choices_is_a_decode_error() -> None:
    with pytest.raises(DecodeError) as error:
        decode_response({"id": "x", "choices": []})
    assert error.value.path == "$.choices"


def test_response_parts_and_message_stamps() -> None:
    body = {
        "id": "r1",
        "model": "gpt-x",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "hi", "refusal": None},
            }
        ],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    }
    response = decode_response(body)
    assert isinstance(response, ModelResponse)
    assert response.message == Message(
        "assistant",
        (Text("hi"),),
        provider="openai",
        model="gpt-x",
        stop_reason="stop",
        usage=response.usage,
        response_id="r1",
    )
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.reasoning_tokens) == (
        10,
        4,
        2,
    )
    assert msgspec.json.decode(msgspec.json.encode(response.message), type=Message) == response.message


def test_a_cache_entry_goes_away_with_its_message() -> None:
    message = user("short-lived")
    cache: PerMessageCache[Any] = PerMessageCache()
    encode_messages([message], profile=Profile("cache-probe"), cache=cache)
    table = cache[Profile("cache-probe")]
    key = id(message)
    assert key in table
    del message
    gc.collect()
    assert key not in table


def test_tool_results_with_media_import_whole() -> None:
    items = [
        {
            "role": "assistant",
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "shot", "arguments": "{}"}}],
        },
        {
            "role": "tool",
            "tool_call_id": "a",
            "content": [
                {"type": "text", "text": "see"},
                {"type": "image_url", "image_url": {"url": "https://x/i.png"}},
            ],
        },
        {"role": "tool", "tool_call_id": "nobody", "content": ""},
    ]
    messages, report = decode_messages(items)
    assert messages[1] == tool(
        ToolResult("a", "shot", (Text("see"), Image(url="https://x/i.png"))), ToolResult("nobody", "", ())
    )
    # source positions: the third entry of the list, a field of it (no content index)
    assert [(loss.message, loss.part, loss.what) for loss in report.losses] == [(2, None, "tool name")]
    _, back = encode_messages(messages)
    assert [(loss.message, loss.part, loss.what) for loss in back.losses] == [(1, 0, "image in tool result")]


def test_what_a_url_image_or_an_untitled_pdf_cannot_keep_is_reported() -> None:
    message = user(
        Image(url="https://x/i.png", media_type="image/png"),
        Document(data=b"%PDF-1.4", media_type="application/pdf"),
    )
    encoded, report = encode_messages([message])
    assert encoded[0]["content"][1]["file"]["filename"] == "document.pdf"
    assert [(loss.part, loss.kind, loss.what) for loss in report.losses] == [
        (0, "dropped", "image media type"),
        (1, "approximated", "document title"),
    ]


# -- import reports: source positions, every loss listed -------------------------------------------


def _sdk_checked(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` validated against the openai SDK's own request types: the shapes the SDK
    documents for ``messages`` (image ``detail``, ``input_audio`` parts, participant names)."""
    from openai.types.chat import ChatCompletionMessageParam
    from pydantic import TypeAdapter

    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(items)
    return items


def test_import_losses_name_source_positions_and_are_all_documented() -> None:
    """Losses point at the source list (entry index, index in its ``content``), not at tether's
    messages, even where they differ: consecutive ``tool`` entries merge into one message, dropped
    parts shift later ones. Every reported loss is one docs/compatibility.md lists."""
    items = _sdk_checked(
        [
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                    {"type": "text", "text": "what is on this picture?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.com/a.png", "detail": "high"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "zoom", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "crop", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "zoomed"},
            {"role": "tool", "tool_call_id": "nobody", "content": "lost"},
            {
                "role": "user",
                "name": "ann",
                "content": [
                    {"type": "image_url", "image_url": {"url": "https://example.com/b.png", "detail": "low"}}
                ],
            },
        ]
    )
    messages, report = decode_messages(items)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert [(loss.message, loss.part, loss.kind, loss.what) for loss in report.losses] == [
        (1, 0, "dropped", "input_audio content"),
        (1, 2, "dropped", "image detail"),
        (4, None, "approximated", "tool name"),
        (5, 0, "dropped", "image detail"),
        (5, None, "dropped", "participant name"),
    ]
    for loss in report.losses:
        assert documented_loss("openai_chat", loss.what, loss.kind), loss
        assert f"`{loss.what}`" in COMPATIBILITY or loss.what.endswith(" content"), loss
    assert "`<type> content`" in COMPATIBILITY
    assert "`input_audio`" in COMPATIBILITY


def test_recorded_reasoning_is_kept_whichever_field_carries_it(provider_samples: Path) -> None:
    """Ollama answers with ``reasoning`` (recorded); vLLM's server writes ``reasoning_content``
    and, since it added ``reasoning``, sends the other one as ``null``. The text is kept either way,
    and a second reasoning text that differs is reported, never dropped silently."""
    interaction = load_cassette(
        provider_samples / "ollama" / "test_ollama_local_native_output_uses_json_schema.yaml"
    )[0]
    recorded = interaction["response"]["parsed_body"]["choices"][0]["message"]
    thought = recorded["reasoning"]
    question = interaction["request"]["parsed_body"]["messages"]
    for message in (recorded, {**recorded, "reasoning_content": None}, {**recorded, "reasoning_content": ""}):
        messages, report = decode_messages([*question, message])
        assert messages[-1].parts[0] == Reasoning(thought)
        assert report.lossless
    both = {**recorded, "reasoning_content": "an earlier draft"}
    messages, report = decode_messages([*question, both])
    assert messages[-1].parts[0] == Reasoning("an earlier draft")
    assert [(loss.message, loss.part, loss.what) for loss in report.losses] == [(1, None, "reasoning field")]
    shaped = {**recorded, "reasoning": {"summary": thought}}  # an object, as some proxies send
    messages, report = decode_messages([*question, shaped])
    assert not any(type(p) is Reasoning for p in messages[-1].parts)
    assert [(loss.message, loss.kind, loss.what) for loss in report.losses] == [
        (1, "dropped", "reasoning field")
    ]
    assert all(documented_loss("openai_chat", loss.what, loss.kind) for loss in report.losses)


@pytest.mark.parametrize(
    ("folder", "fmt", "key"),
    [
        ("openai-chat", "openai_chat", "messages"),
        ("groq", "openai_chat", "messages"),
        ("ollama", "openai_chat", "messages"),
        ("openai-responses", "openai_responses", "input"),
        ("anthropic", "anthropic", "messages"),
        ("gemini", "gemini", "contents"),
    ],
)
def test_every_loss_reported_on_recorded_requests_is_documented(
    provider_samples: Path, folder: str, fmt: str, key: str
) -> None:
    reported = 0
    for path in sorted((provider_samples / folder).glob("*.yaml")):
        for interaction in yaml.safe_load(path.read_text())["interactions"]:
            body = interaction["request"].get("parsed_body")
            if not isinstance(body, dict) or not isinstance(body.get(key), list):
                continue
            _, report = convert.FORMATS[fmt].load(body[key])
            for loss in report.losses:
                assert documented_loss(fmt, loss.what, loss.kind), (path.name, loss)
                reported += 1
    assert reported or fmt == "openai_chat"
