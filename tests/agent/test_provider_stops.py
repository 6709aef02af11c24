"""A step whose response holds no answer and stops for a provider reason tether does not
normalize (passed through as the provider spells it) fails the run with a ModelError naming the
reason; it is never an empty successful output. The payloads are hand-written after the
providers' documented response shapes, decoded by tether's own wire decoders."""

from __future__ import annotations

from typing import Any

import pytest

from tether import ModelError
from tether.agent import Agent
from tether.models import ModelResponse
from tether.models.testing import FunctionModel
from tether.models.wire import anthropic, gemini

_GEMINI_MALFORMED = {
    "candidates": [
        {
            "finishReason": "MALFORMED_FUNCTION_CALL",
            "finishMessage": "Malformed function call: print(default_api.lookup(q=",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
    "modelVersion": "gemini-2.5-flash",
    "responseId": "r1",
}
_ANTHROPIC_PAUSED = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [],
    "stop_reason": "pause_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 0},
}


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (gemini.decode_response(_GEMINI_MALFORMED), "MALFORMED_FUNCTION_CALL"),
        (anthropic.decode_response(_ANTHROPIC_PAUSED), "pause_turn"),
    ],
)
async def test_an_empty_answer_with_a_provider_stop_reason_fails_the_run(
    response: ModelResponse, reason: str
) -> None:
    assert response.stop_reason == reason
    assert not response.message.parts

    def reply(messages: Any, info: Any) -> ModelResponse:
        return response

    with pytest.raises(ModelError, match=f"stopped with '{reason}'"):
        await Agent(FunctionModel(reply)).run("look it up")


async def test_an_empty_answer_that_stopped_normally_is_still_an_answer() -> None:
    result = await Agent(FunctionModel(lambda messages, info: "")).run("say nothing")
    assert result.output == ""
