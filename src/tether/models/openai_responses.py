"""The OpenAI Responses driver (``"openai-responses:<model>"``), stateless.

Every request sends the whole conversation with ``store=false``; reasoning models are asked for
``reasoning.encrypted_content`` and their reasoning items are replayed item by item (see
``tether.models.wire.openai_responses``). Needs the ``openai`` SDK: ``pip install 'tether[openai]'``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

from tether.models._sdk import require

require("openai", "openai", "the OpenAI Responses driver")

import openai  # noqa: E402  (after the MissingExtra check above)

from tether.errors import ModelError, UserError  # noqa: E402
from tether.messages import Message  # noqa: E402
from tether.models._base import (  # noqa: E402
    ModelResponse,
    ModelSettings,
    Profile,
    StreamEvent,
    ToolDefinition,
)
from tether.models._driver import Driver, RequestReports, decode_body, sdk_error, stream_result  # noqa: E402
from tether.models.wire._json import given  # noqa: E402
from tether.models.wire.openai_responses import (  # noqa: E402
    REASONING_FAMILIES,
    StreamAccumulator,
    decode_response,
    default_profile,
    encode_messages,
    encode_tools,
)

__all__ = ["PROFILES", "OpenAIResponsesModel"]

PROFILES: tuple[Profile, ...] = (
    default_profile(""),  # any non-reasoning model: reasoning items are never sent
    *(default_profile(family) for family in REASONING_FAMILIES),
)

_PROVIDER_LABEL = "openai"
_OWNED_KEYS = frozenset({"input", "store", "include", "stream", "previous_response_id"})
"""Body keys ``ModelSettings.extra`` may not override: the driver is stateless (``store=false``,
no ``previous_response_id``), asks for encrypted reasoning, and sends the whole history."""


class OpenAIResponsesModel(Driver):
    """A model behind the OpenAI Responses API.

    ``client`` may be a ready ``openai.AsyncOpenAI``; otherwise one is built from ``api_key``,
    ``base_url``, ``http_client`` and ``max_retries`` (the SDK's retry policy applies).
    ``profile`` overrides the capability profile derived from the model name.
    """

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: Any = None,
        max_retries: int = 2,
        profile: Profile | None = None,
    ) -> None:
        if not model:
            raise UserError("OpenAIResponsesModel needs a model name, e.g. 'gpt-5'")
        self._model = model
        self._profile = profile or default_profile(model)
        self._client = client or openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, http_client=http_client, max_retries=max_retries
        )
        self._reports = RequestReports()

    @property
    def name(self) -> str:
        return f"openai-responses:{self._model}"

    def request_body(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The JSON body this driver sends (without ``stream``). Raises ``UnsupportedContent``
        for a part the model cannot take, before any network call."""
        items = self._wire(messages, encode_messages)
        body: dict[str, Any] = {"model": self._model, "input": items, "store": False}
        if self._profile.reasoning_replay != "never":
            body["include"] = ["reasoning.encrypted_content"]
        if instructions:
            body["instructions"] = instructions
        if tools:
            body["tools"] = encode_tools(tools)
        if settings is not None:
            if settings.stop:
                raise UserError("the OpenAI Responses API has no stop sequences (settings.stop)")
            if settings.seed is not None:
                raise UserError("the OpenAI Responses API has no seed (settings.seed)")
            body.update(
                given(
                    max_output_tokens=settings.max_tokens,
                    temperature=settings.temperature,
                    top_p=settings.top_p,
                    parallel_tool_calls=settings.parallel_tool_calls,
                )
            )
            owned = sorted(_OWNED_KEYS.intersection(settings.extra))
            if owned:
                raise UserError(
                    f"settings.extra cannot set {', '.join(owned)}: the OpenAI Responses driver "
                    "owns them (stateless store=false, encrypted reasoning, the history)"
                )
            body.update(settings.extra)
        return body

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """One request, no tool execution."""
        body = self.request_body(messages, instructions=instructions, tools=tools, settings=settings)
        try:
            # The body goes through extra_body verbatim so the SDK does not re-shape items
            # (encrypted reasoning must arrive byte for byte).
            raw = await self._client.responses.with_raw_response.create(
                stream=False, extra_body=body, timeout=_timeout(settings)
            )
        except openai.APIError as exc:
            raise _error(exc) from exc
        return decode_body(raw.content, _PROVIDER_LABEL, _decode)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """One streamed request: deltas, then the final ``ModelResponse`` (assembled from the
        streamed items, equal to what ``generate`` returns for the same output)."""
        body = self.request_body(messages, instructions=instructions, tools=tools, settings=settings)
        accumulator = StreamAccumulator()
        try:
            async with self._client.responses.with_streaming_response.create(
                stream=True, extra_body=body, timeout=_timeout(settings)
            ) as response:
                async for line in response.iter_lines():
                    event = _sse_data(line)
                    if event is None:
                        continue
                    if event.get("type") == "error":
                        raise ModelError(f"{_PROVIDER_LABEL} stream error: {event}", stage="model")
                    for delta in accumulator.feed(event):
                        yield delta
        except openai.APIError as exc:
            raise _error(exc) from exc
        yield _failed(
            stream_result(accumulator, _PROVIDER_LABEL, end="the response completed"), accumulator.response
        )


def _timeout(settings: ModelSettings | None) -> float | openai.NotGiven:
    if settings is None or settings.timeout is None:
        return openai.NOT_GIVEN
    return settings.timeout


def _sse_data(line: str) -> dict[str, Any] | None:
    if not line.startswith("data:"):
        return None
    text = line[5:].strip()
    if not text or text == "[DONE]":
        return None
    try:
        value: Any = json.loads(text)
    except ValueError as exc:
        raise ModelError(
            f"{_PROVIDER_LABEL} sent a stream event that is not JSON: {exc}", stage="model"
        ) from exc
    return cast(dict[str, Any], value) if isinstance(value, dict) else None


def _error(exc: Exception) -> ModelError:
    return sdk_error(exc, openai.APIStatusError, _PROVIDER_LABEL)


def _decode(body: dict[str, Any]) -> ModelResponse:
    return _failed(decode_response(body), body)


def _failed(response: ModelResponse, body: Mapping[str, Any]) -> ModelResponse:
    """``response``, unless the API said the response failed: then ``ModelError`` with its error."""
    if response.stop_reason == "error":
        raise ModelError(f"{_PROVIDER_LABEL} response failed: {body.get('error')}", stage="model")
    return response
