"""The Gemini wire mapping against recorded traffic: contents import and export back equal,
decoded responses replay into the next recorded request (thought signatures byte for byte,
function responses paired with their calls), streamed chunks assemble into the non-streamed
message."""

from __future__ import annotations

import base64
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
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
    tool,
    user,
)
from tether.models import ModelResponse, ReasoningDelta, TextDelta, ToolCallDelta
from tether.models.wire.gemini import (
    FOREIGN_CALL_SIGNATURE,
    StreamAccumulator,
    decode_messages,
    decode_response,
    encode_messages,
    profile_for,
)

NATIVE_PARTS = {"toolCall", "toolResponse", "videoMetadata", "executableCode", "codeExecutionResult"}
"""Server-side tool parts with no tether equivalent: the only things an import may drop."""


def load_cassette(samples: Path, name: str) -> list[dict[str, Any]]:
    """The generateContent / streamGenerateContent interactions of one recorded Gemini cassette."""
    data = yaml.safe_load((samples / "gemini" / name).read_text())
    return [it for it in data["interactions"] if "enerateContent" in it["request"]["uri"]]


def chunks_of(interaction: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON chunks of a recorded ``streamGenerateContent?alt=sse`` response."""
    body = interaction["response"]["body"]
    text = body["string"] if isinstance(body, dict) else body
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def b64bytes(text: str) -> bytes:
    """Either base64 alphabet to bytes: signatures and data are compared as the bytes they carry."""
    return base64.b64decode(text.replace("-", "+").replace("_", "/"))


def canonical(contents: list[dict[str, Any]], ids: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Contents with equivalent spellings made one: base64 as bytes, snake_case media keys (the
    SDK writes ``mime_type``) as camelCase; call ids renamed through ``ids`` (recorded → tether)."""
    out: list[dict[str, Any]] = []
    for content in contents:
        parts: list[dict[str, Any]] = []
        for part in content["parts"]:
            part = dict(part)
            if "thoughtSignature" in part:
                part["thoughtSignature"] = b64bytes(part["thoughtSignature"])
            names = {"file_uri": "fileUri", "mime_type": "mimeType"}
            if "inlineData" in part:
                inline = {names.get(k, k): v for k, v in part["inlineData"].items()}
                part["inlineData"] = {**inline, "data": b64bytes(inline["data"])}
            if "fileData" in part:
                part["fileData"] = {names.get(k, k): v for k, v in part["fileData"].items()}
            for key in ("functionCall", "functionResponse"):
                if key in part and ids is not None and "id" in part[key]:
                    part[key] = {**part[key], "id": ids.get(part[key]["id"], part[key]["id"])}
            parts.append(part)
        out.append({"role": content.get("role", "user"), "parts": parts})
    return out


def without_native(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for content in canonical(contents):
        parts = [
            {k: v for k, v in p.items() if k != "videoMetadata"}
            for p in content["parts"]
            if not NATIVE_PARTS & set(p) or "fileData" in p
        ]
        out.append({"role": content["role"], "parts": parts})
    return out


# -- transcripts: import, export back -----------------------------------------------------------
def test_every_recorded_request_imports_and_exports_back(provider_samples: Path) -> None:
    count = lossless = 0
    for path in sorted((provider_samples / "gemini").glob("*.yaml")):
        for index, interaction in enumerate(yaml.safe_load(path.read_text())["interactions"]):
            body = interaction["request"].get("parsed_body")
            if not isinstance(body, dict) or "contents" not in body:
                continue
            count += 1
            where = f"{path.name}[{index}]"
            messages, report = decode_messages(body["contents"])
            encoded, out_report = encode_messages(messages)
            assert out_report.lossless, (where, out_report.losses)
            for loss in report.losses:
                assert any(kind in loss.what for kind in NATIVE_PARTS), (where, loss)
            if report.lossless:
                lossless += 1
                assert canonical(encoded) == canonical(body["contents"]), where
            else:
                assert canonical(encoded) == without_native(body["contents"]), where
    assert count >= 50
    assert lossless >= 45


def test_function_responses_without_ids_pair_by_name_in_call_order() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "temp", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"},
                {"functionCall": {"name": "temp", "args": {"city": "Rome"}}},
                {"functionCall": {"name": "rain", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "rain", "response": {"output": "no"}}},
                {"functionResponse": {"name": "temp", "response": {"output": "20C"}}},
                {"functionResponse": {"name": "temp", "response": {"error": "unknown city"}}},
            ],
        },
    ]
    messages, report = decode_messages(contents)
    assert report.lossless
    calls = messages[1].tool_calls
    assert [c.id for c in calls] == ["gemini-call-1-0", "gemini-call-1-1", "gemini-call-1-2"]
    assert calls[0].signature == "c2ln"
    results = messages[2].tool_results
    assert [(r.call_id, r.text, r.failed) for r in results] == [
        ("gemini-call-1-2", "no", False),
        ("gemini-call-1-0", "20C", False),
        ("gemini-call-1-1", "unknown city", True),
    ]
    encoded, _ = encode_messages(messages)
    sent = [p["functionResponse"] for p in encoded[2]["parts"]]
    assert [r["id"] for r in sent] == [r.call_id for r in results]
    assert sent[2]["response"] == {"error": "unknown city"}


def test_tool_results_are_json_when_they_are_json_objects() -> None:
    results = [
        ToolResult("c1", "f", (Text('{"temp": 20}'),)),
        ToolResult("c2", "f", (Text("plain"),)),
        ToolResult("c3", "f", (Text("[1, 2]"),)),
    ]
    encoded, _ = encode_messages([tool(*results)])
    responses = [p["functionResponse"]["response"] for p in encoded[0]["parts"]]
    assert responses == [{"temp": 20}, {"output": "plain"}, {"output": "[1, 2]"}]
    back, _ = decode_messages(encoded)
    assert [r.text for r in back[0].tool_results] == ['{"temp":20}', "plain", "[1, 2]"]


# -- responses replayed into the next request --------------------------------------------------
REPLAYS = [
    "test_google_instructions_only_with_tool_calls.yaml",
    "test_google_text_output_function.yaml",
    "test_google_prompted_output_with_tools.yaml",
    "test_google_tool_config_any_with_tool_without_args.yaml",
    "test_google_vertex_tool_combination_omits_include_server_side_tool_invocations.yaml",
    "test_google_streaming_tool_call_thought_signature.yaml",
    "test_google_model_iter_stream.yaml",
]


def response_of(interaction: dict[str, Any]) -> ModelResponse:
    """The decoded response: the body, or the assembled stream."""
    body = interaction["response"].get("parsed_body")
    if isinstance(body, dict):
        return decode_response(body)
    accumulator = StreamAccumulator()
    for chunk in chunks_of(interaction):
        accumulator.feed(chunk)
    assert accumulator.finished
    return accumulator.result()


def next_history(
    history: list[Message], response: ModelResponse, following: list[Message]
) -> tuple[list[Message], dict[str, str]]:
    """The history an agent would send next: ours plus the recorded tool results / prompt, with
    results re-pointed at the ids tether gave the calls. Returns it and recorded id → tether id."""
    slot = len(history)
    recorded = following[slot]
    assert recorded.role == "assistant"
    ids = {
        r.id: o.id
        for r, o in zip(recorded.tool_calls, response.message.tool_calls, strict=True)
        if r.id and o.id
    }
    tail: list[Message] = []
    for message in following[slot + 1 :]:
        if message.role == "tool":
            results = tuple(
                ToolResult(ids.get(r.call_id, r.call_id), r.name, r.content, failed=r.failed)
                for r in message.tool_results
            )
            message = Message("tool", results)
        tail.append(message)
    return [*history, response.message, *tail], ids


@pytest.mark.parametrize("name", REPLAYS)
def test_decoded_response_replays_into_the_next_recorded_request(provider_samples: Path, name: str) -> None:
    interactions = load_cassette(provider_samples, name)
    assert len(interactions) >= 2
    history, _ = decode_messages(interactions[0]["request"]["parsed_body"]["contents"])
    ids: dict[str, str] = {}
    for step in range(len(interactions) - 1):
        response = response_of(interactions[step])
        recorded_next = interactions[step + 1]["request"]["parsed_body"]["contents"]
        following, _ = decode_messages(recorded_next)
        history, new_ids = next_history(history, response, following)
        ids.update(new_ids)
        encoded, report = encode_messages(history)
        assert report.lossless, report.losses
        assert canonical(encoded) == canonical(recorded_next, ids), f"step {step}"
        # pairing: every function response answers a call of the model turn just before it
        for before, turn in itertools.pairwise(encoded):
            answered = [p["functionResponse"]["id"] for p in turn["parts"] if "functionResponse" in p]
            if answered:
                asked = [p["functionCall"]["id"] for p in before["parts"] if "functionCall" in p]
                assert sorted(answered) == sorted(asked)


def test_thought_signatures_on_calls_survive_byte_for_byte(provider_samples: Path) -> None:
    interactions = load_cassette(provider_samples, "test_google_instructions_only_with_tool_calls.yaml")
    body = interactions[0]["response"]["parsed_body"]
    response = decode_response(body)
    calls = response.message.tool_calls
    raw_parts = body["candidates"][0]["content"]["parts"]
    assert [c.signature for c in calls] == [p.get("thoughtSignature") for p in raw_parts]
    sent = interactions[1]["request"]["parsed_body"]["contents"][1]["parts"][0]["thoughtSignature"]
    assert calls[0].signature is not None
    assert b64bytes(calls[0].signature) == b64bytes(sent)
    assert response.stop_reason == "tool_calls"
    assert [c.id for c in calls] == [f"gemini-{body['responseId']}-{i}" for i in range(3)]
    assert decode_response(body) == response  # ids are deterministic
    assert response.usage.reasoning_tokens == 190
    assert response.usage.output_tokens == 30 + 190
    assert response.usage.input_tokens == 83


def test_thoughts_are_google_reasoning_and_replay_only_to_google(provider_samples: Path) -> None:
    interactions = load_cassette(provider_samples, "test_google_model_thinking_part_from_other_model.yaml")
    response = decode_response(interactions[0]["response"]["parsed_body"])
    thought, answer = response.message.parts
    assert isinstance(thought, Reasoning)
    assert thought.provider == "google"
    assert isinstance(answer, Text)
    assert answer.signature is not None
    encoded, report = encode_messages([user("q"), response.message], profile=profile_for("gemini-2.5-pro"))
    assert encoded[1]["parts"][0]["thought"] is True
    assert report.lossless
    other = Reasoning("pondering", signature="sig", provider="openai")
    encoded, report = encode_messages([user("q"), assistant(other, "hi", provider="openai")])
    assert encoded[1]["parts"] == [{"text": "hi"}]
    assert [(loss.message, loss.part, loss.what) for loss in report.losses] == [(1, 0, "reasoning")]
    old = profile_for("gemini-2.0-flash")
    encoded, report = encode_messages([response.message], profile=old)
    # gemini-2.0 replays nothing ("never"): neither the thought nor the answer's signature
    assert [loss.what for loss in report.losses] == ["reasoning", "signature"]
    assert encoded[0]["parts"] == [{"text": answer.text}]


def test_signatures_from_other_providers_are_not_sent() -> None:
    call = ToolCall("call_1", "f", "{}", signature="msg_abc")
    encoded, report = encode_messages([assistant(call, Text("x", signature="msg_1"), provider="openai")])
    assert encoded[0]["parts"] == [
        {
            "functionCall": {"name": "f", "args": {}, "id": "call_1"},
            "thoughtSignature": FOREIGN_CALL_SIGNATURE,
        },
        {"text": "x"},
    ]
    assert [(loss.part, loss.kind, loss.what) for loss in report.losses] == [
        (0, "dropped", "signature"),
        (0, "approximated", "signature"),
        (1, "dropped", "signature"),
    ]


def test_calls_from_another_provider_replay_as_recorded(provider_samples: Path) -> None:
    """History made with OpenAI continued on Gemini 3: the recorded request carries the
    placeholder signature on the foreign call and no foreign reasoning."""
    (interaction,) = load_cassette(provider_samples, "test_thinking_with_tool_calls_from_other_model.yaml")
    recorded = interaction["request"]["parsed_body"]["contents"]
    call_id = recorded[1]["parts"][0]["functionCall"]["id"]
    history = [
        user(recorded[0]["parts"][0]["text"]),
        assistant(
            Reasoning("summary", signature="encrypted", provider="openai"),
            ToolCall(call_id, "get_country", "{}"),
            provider="openai",
            model="gpt-5",
        ),
        tool(ToolResult(call_id, "get_country", (Text('{"return_value":"Mexico"}'),))),
    ]
    encoded, report = encode_messages(history, profile=profile_for("gemini-3-pro-preview"))
    assert canonical(encoded) == canonical(recorded)
    assert [(loss.message, loss.what) for loss in report.losses] == [(1, "reasoning"), (1, "signature")]
    encoded, _ = encode_messages(history, profile=profile_for("gemini-2.0-flash"))
    assert "thoughtSignature" not in encoded[1]["parts"][0]


def test_media_parts() -> None:
    parts = (
        Image(data=b"\x89PNG", media_type="image/png"),
        Document(data=b"%PDF", media_type="application/pdf"),
        Image(url="gs://bucket/cat.png", media_type="image/png"),
        Document(url="https://example.com/a.pdf", media_type="application/pdf"),
    )
    encoded, report = encode_messages([user("look", *parts)])
    assert report.lossless
    assert encoded[0]["parts"][1:] == [
        {"inlineData": {"data": "iVBORw==", "mimeType": "image/png"}},
        {"inlineData": {"data": "JVBERg==", "mimeType": "application/pdf"}},
        {"fileData": {"fileUri": "gs://bucket/cat.png", "mimeType": "image/png"}},
        {"fileData": {"fileUri": "https://example.com/a.pdf", "mimeType": "application/pdf"}},
    ]
    back, _ = decode_messages(encoded)
    assert back[0].parts[1:] == parts


@pytest.mark.parametrize(
    ("finish", "calls", "normalized"),
    [
        ("STOP", False, "stop"),
        ("STOP", True, "tool_calls"),
        ("MAX_TOKENS", False, "length"),
        ("SAFETY", False, "content_filter"),
        ("MALFORMED_FUNCTION_CALL", False, "MALFORMED_FUNCTION_CALL"),
    ],
)
def test_stop_reasons_are_normalized(finish: str, calls: bool, normalized: str) -> None:
    part = {"functionCall": {"name": "f", "args": {}}} if calls else {"text": "x"}
    body = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": finish}]}
    assert decode_response(body).stop_reason == normalized


def test_a_blocked_prompt_is_a_content_filter_stop() -> None:
    response = decode_response(
        {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4}}
    )
    assert response.stop_reason == "content_filter"
    assert response.message.parts == ()
    assert response.usage.input_tokens == 4


# -- streaming -----------------------------------------------------------------------------------
def test_recorded_thinking_stream_assembles(provider_samples: Path) -> None:
    interaction = load_cassette(provider_samples, "test_google_model_thinking_part_iter.yaml")[0]
    chunks = chunks_of(interaction)
    accumulator = StreamAccumulator()
    deltas: list[Any] = []
    for chunk in chunks:
        deltas.extend(accumulator.feed(chunk))
    response = accumulator.result()
    thought, answer = response.message.parts
    assert isinstance(thought, Reasoning)
    assert isinstance(answer, Text)
    pieces = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert thought.text == "".join(p["text"] for p in pieces if p.get("thought"))
    assert answer.text == "".join(p["text"] for p in pieces if not p.get("thought"))
    assert answer.signature == next(p["thoughtSignature"] for p in pieces if "thoughtSignature" in p)
    assert "".join(d.text for d in deltas if isinstance(d, ReasoningDelta) and d.index == 0) == thought.text
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta) and d.index == 1) == answer.text
    assert response.usage.reasoning_tokens == chunks[-1]["usageMetadata"]["thoughtsTokenCount"]
    assert response.stop_reason == "stop"


def test_recorded_call_stream_keeps_the_signature(provider_samples: Path) -> None:
    interaction = load_cassette(provider_samples, "test_google_streaming_tool_call_thought_signature.yaml")[0]
    chunks = chunks_of(interaction)
    accumulator = StreamAccumulator()
    deltas = [d for chunk in chunks for d in accumulator.feed(chunk)]
    response = accumulator.result()
    (call,) = response.message.parts
    assert isinstance(call, ToolCall)
    assert call.signature == chunks[0]["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    assert deltas == [ToolCallDelta(0, id=None, name="get_country", arguments="{}")]
    assert response.stop_reason == "tool_calls"


def chunked(body: dict[str, Any], cuts: list[int]) -> list[dict[str, Any]]:
    """The chunks Gemini streams for ``body``: each text part cut at ``cuts`` (its signature on
    the first piece), other parts whole; metadata on every chunk, the finish reason on the last."""
    candidate = body["candidates"][0]
    meta = {k: v for k, v in body.items() if k != "candidates"}
    pieces: list[dict[str, Any]] = []
    for part in candidate["content"]["parts"]:
        text = part.get("text")
        if not isinstance(text, str) or not text:
            pieces.append(part)
            continue
        points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
        for n, (a, b) in enumerate(itertools.pairwise(points)):
            if b > a:
                piece = {k: v for k, v in part.items() if k != "thoughtSignature" or n == 0}
                piece["text"] = text[a:b]
                pieces.append(piece)
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [p]}, "index": 0}], **meta} for p in pieces
    ]
    chunks[-1]["candidates"][0]["finishReason"] = candidate["finishReason"]
    return chunks


STREAM_EQUIVALENCE = [
    ("test_google_model_thinking_part_from_other_model.yaml", 0),
    ("test_google_instructions_only_with_tool_calls.yaml", 0),
    ("test_google_text_output_function.yaml", 1),
    ("test_google_model_max_tokens.yaml", 0),
]


@pytest.mark.parametrize(("name", "index"), STREAM_EQUIVALENCE)
@given(cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=6))
@settings(max_examples=50)  # four recorded bodies; the cut points are all that varies
def test_streamed_assembly_equals_the_non_streamed_decode(
    provider_samples: Path, name: str, index: int, cuts: list[int]
) -> None:
    body = load_cassette(provider_samples, name)[index]["response"]["parsed_body"]
    accumulator = StreamAccumulator()
    for chunk in chunked(body, cuts):
        accumulator.feed(chunk)
    assert accumulator.result() == decode_response(body)


# -- malformed transcripts -----------------------------------------------------------------------
MALFORMED = [
    ({"parts": []}, "$"),
    ([{"role": "robot", "parts": []}], "$[0].role"),
    ([{"role": "user", "parts": "hi"}], "$[0].parts"),
    ([{"role": "user", "parts": [{"text": 3}]}], "$[0].parts[0].text"),
    ([{"role": "model", "parts": [{"functionCall": {"args": {}}}]}], "$[0].parts[0].functionCall.name"),
    (
        [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": [1]}}]}],
        "$[0].parts[0].functionCall.args",
    ),
    (
        [{"role": "user", "parts": [{"inlineData": {"data": "%%", "mimeType": "image/png"}}]}],
        "$[0].parts[0].inlineData.data",
    ),
    (
        [{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}],
        "$[0].parts[0].functionResponse",
    ),
]


@pytest.mark.parametrize(("contents", "path"), MALFORMED)
def test_malformed_contents_name_the_path(contents: object, path: str) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_messages(contents)
    assert caught.value.path == path


# -- a model turn that is only {"text": ""} --------------------------------------------------------

# What the Gemini API answered with HTTP 200 in a reported conversation (finishReason STOP and one
# empty text part: the model chose to say nothing), as quoted in the pydantic-ai issue that hit it.
EMPTY_TEXT_TURN = {"role": "model", "parts": [{"text": ""}]}


def test_an_empty_model_turn_is_kept_reported_and_exported_with_alternating_roles(
    provider_samples: Path,
) -> None:
    question = load_cassette(provider_samples, "test_google_model_top_p.yaml")[0]["request"]["parsed_body"]
    contents = [
        *question["contents"],
        EMPTY_TEXT_TURN,
        {"role": "user", "parts": [{"text": "Please answer."}]},
    ]
    messages, report = decode_messages(contents)
    assert [m.role for m in messages] == ["user", "assistant", "user"]  # the turn is kept...
    assert messages[1].parts == ()
    assert [(loss.message, loss.part, loss.kind, loss.what) for loss in report.losses] == [
        (1, 0, "dropped", "empty text")  # ...and what it held is reported
    ]
    exported, back = encode_messages(messages)
    assert [c["role"] for c in exported] == ["user"]  # roles alternate: never two user turns in a row
    assert exported[0]["parts"] == [*question["contents"][0]["parts"], {"text": "Please answer."}]
    assert [(loss.message, loss.kind, loss.what) for loss in back.losses] == [
        (1, "dropped", "assistant message"),
        (2, "approximated", "user message"),
    ]


def test_the_empty_answer_response_decodes_to_an_empty_assistant_message() -> None:
    body = {
        "candidates": [{"content": EMPTY_TEXT_TURN, "finishReason": "STOP", "index": 0}],
        "responseId": "r-empty",
    }
    response = decode_response(body)
    assert response.message.parts == ()
    assert response.stop_reason == "stop"
    history = [user("q"), response.message, user("again"), assistant("a"), user("more")]
    contents, report = encode_messages(history)
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[0]["parts"] == [{"text": "q"}, {"text": "again"}]
    assert {loss.what for loss in report.losses} == {"assistant message", "user message"}


# -- streamed delta indexes are final part indexes ---------------------------------------------------


def test_deltas_after_server_side_parts_carry_final_part_indexes(provider_samples: Path) -> None:
    """A recorded file-search stream: the server's ``toolCall`` / ``toolResponse`` parts come
    first and have no tether part, so the text is part 0 of the final message, and so is every
    text delta's index. A recorded function call streamed after the text is part 1."""
    search = next(
        it
        for it in load_cassette(
            provider_samples, "test_google_model_file_search_grounding_gemini_3[True].yaml"
        )
        if "stream" in it["request"]["uri"]
    )
    chunks = chunks_of(search)
    assert "toolCall" in chunks[0]["candidates"][0]["content"]["parts"][0]
    call_chunk = chunks_of(
        load_cassette(provider_samples, "test_google_streaming_tool_call_thought_signature.yaml")[0]
    )[0]
    for stream in (chunks, [*chunks[:-1], call_chunk, chunks[-1]]):
        accumulator = StreamAccumulator()
        deltas = [d for chunk in stream for d in accumulator.feed(chunk)]
        final = accumulator.result().message
        assert final == decode_response(accumulator.body()).message
        assert deltas
        for delta in deltas:
            part = final.parts[delta.index]
            expected = {TextDelta: Text, ReasoningDelta: Reasoning, ToolCallDelta: ToolCall}[type(delta)]
            assert type(part) is expected, (delta, part)
        text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
        assert text == final.parts[0].text  # type: ignore[union-attr]
    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert [(d.index, d.name) for d in calls] == [(1, "get_country")]
