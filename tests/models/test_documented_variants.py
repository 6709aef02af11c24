"""Response shapes the providers document but the recorded traffic lacks: a refusal on the
Responses API, a prompt blocked mid-stream on Gemini, the deprecated ``function_call`` field on
OpenAI Chat. Every payload here is hand-written after the provider's published response
reference (field names, nesting and event order as documented), not recorded."""

from __future__ import annotations

from typing import Any

from tether import Text, ToolCall
from tether.models import ModelResponse, TextDelta, ToolCallDelta
from tether.models.wire import gemini, openai_chat, openai_responses


def _responses_body(output: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-4o",
        "status": status,
        "output": output,
        "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
    }


_REFUSAL_ITEM = {
    "type": "message",
    "id": "msg_1",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "refusal", "refusal": "I can't help with that."}],
}


def test_a_responses_refusal_is_a_content_filter_stop_not_an_answer() -> None:
    response = openai_responses.decode_response(_responses_body([_REFUSAL_ITEM]))
    assert response.stop_reason == "content_filter"  # as OpenAI Chat's refusal field
    assert response.message.stop_reason == "content_filter"
    assert response.message.parts == (Text("I can't help with that.", provider_id="msg_1"),)


def test_a_streamed_responses_refusal_stops_as_the_non_streamed_one() -> None:
    created = _responses_body([], status="in_progress")
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": created, "sequence_number": 0},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**_REFUSAL_ITEM, "status": "in_progress", "content": []},
            "sequence_number": 1,
        },
        {
            "type": "response.content_part.added",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_1",
            "part": {"type": "refusal", "refusal": ""},
            "sequence_number": 2,
        },
        {
            "type": "response.refusal.delta",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_1",
            "delta": "I can't help with that.",
            "sequence_number": 3,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": _REFUSAL_ITEM, "sequence_number": 4},
        {"type": "response.completed", "response": _responses_body([_REFUSAL_ITEM]), "sequence_number": 5},
    ]
    accumulator = openai_responses.StreamAccumulator()
    for event in events:
        accumulator.feed(event)
    assert accumulator.result() == openai_responses.decode_response(_responses_body([_REFUSAL_ITEM]))
    assert accumulator.result().stop_reason == "content_filter"


def test_a_prompt_blocked_in_a_gemini_stream_is_a_content_filter_stop() -> None:
    # streamGenerateContent sends one chunk: promptFeedback.blockReason and no candidates.
    chunk = {
        "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []},
        "usageMetadata": {"promptTokenCount": 4, "totalTokenCount": 4},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    }
    accumulator = gemini.StreamAccumulator()
    assert accumulator.feed(chunk) == []
    assert accumulator.finished
    streamed = accumulator.result()
    assert streamed == gemini.decode_response(chunk)
    assert streamed.stop_reason == "content_filter"
    assert streamed.message.parts == ()
    assert streamed.usage.input_tokens == 4


def _chat_body(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-3.5-turbo",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
    }


def test_a_deprecated_function_call_decodes_as_a_tool_call() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    response = openai_chat.decode_response(_chat_body(message, "function_call"))
    assert response.stop_reason == "tool_calls"
    (call,) = response.message.parts
    assert isinstance(call, ToolCall)
    assert (call.name, call.arguments) == ("get_weather", '{"city":"Paris"}')
    assert call.id  # no id on the wire: a deterministic one
    assert openai_chat.decode_response(_chat_body(message, "function_call")) == response


def test_a_streamed_deprecated_function_call_equals_the_non_streamed_one() -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-3.5-turbo",
            "choices": [choice],
        }

    chunks = [
        chunk(
            {"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": ""}}
        ),
        chunk({"function_call": {"arguments": '{"city":'}}),
        chunk({"function_call": {"arguments": '"Paris"}'}}),
        chunk({}, "function_call"),
    ]
    accumulator = openai_chat.StreamAccumulator()
    deltas = [d for c in chunks for d in accumulator.feed(c)]
    final = accumulator.result()
    whole = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    assert final == openai_chat.decode_response(_chat_body(whole, "function_call"))
    assert isinstance(final, ModelResponse)
    assert all(isinstance(d, ToolCallDelta) and d.index == 0 for d in deltas)
    assert "".join(d.arguments or "" for d in deltas if isinstance(d, ToolCallDelta)) == '{"city":"Paris"}'


def test_empty_chat_call_arguments_decode_as_no_arguments() -> None:
    # A call to a tool without parameters, as some OpenAI-compatible servers send it.
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "now", "arguments": ""}}],
    }
    (call,) = openai_chat.decode_response(_chat_body(message, "tool_calls")).message.parts
    assert call == ToolCall("call_1", "now", "{}")
    assert isinstance(call, ToolCall)
    assert not call.truncated
    assert call.args() == {}


def test_empty_responses_call_arguments_decode_as_no_arguments() -> None:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "now",
        "arguments": "",
        "status": "completed",
    }
    response = openai_responses.decode_response(_responses_body([item]))
    assert response.message.parts == (ToolCall("call_1", "now", "{}", provider_id="fc_1"),)
    assert response.stop_reason == "tool_calls"
    # An imported transcript keeps the text verbatim (a conversion round-trips byte for byte).
    imported, _ = openai_responses.decode_messages([item])
    assert imported[0].parts == (ToolCall("call_1", "now", "", provider_id="fc_1"),)


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [choice],
    }


def test_a_streamed_chat_refusal_streams_as_text_at_its_part_index() -> None:
    chunks = [
        _chat_chunk({"role": "assistant", "content": None, "refusal": ""}),
        _chat_chunk({"refusal": "I can't "}),
        _chat_chunk({"refusal": "help with that."}),
        _chat_chunk({}, "stop"),
    ]
    accumulator = openai_chat.StreamAccumulator()
    deltas = [d for c in chunks for d in accumulator.feed(c)]
    final = accumulator.result()
    assert final.stop_reason == "content_filter"
    assert final.message.parts == (Text("I can't help with that."),)
    assert deltas == [TextDelta(0, "I can't "), TextDelta(0, "help with that.")]


def test_streamed_text_refusal_and_call_deltas_carry_final_part_indexes() -> None:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    chunks = [
        _chat_chunk({"role": "assistant", "content": "Partly: "}),
        _chat_chunk({"refusal": "no more."}),
        _chat_chunk({"tool_calls": [call]}),
        _chat_chunk({}, "tool_calls"),
    ]
    accumulator = openai_chat.StreamAccumulator()
    deltas = [d for c in chunks for d in accumulator.feed(c)]
    parts = accumulator.result().message.parts
    assert parts == (Text("Partly: "), Text("no more."), ToolCall("call_1", "f", "{}"))
    for delta in deltas:
        part = parts[delta.index]
        if isinstance(delta, TextDelta):
            assert isinstance(part, Text)
            assert delta.text in part.text
        else:
            assert isinstance(delta, ToolCallDelta)
            assert isinstance(part, ToolCall)
