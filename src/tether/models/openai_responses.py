"""The OpenAI Responses driver (``"openai-responses:<model>"``), stateless.

Every request sends the whole conversation with ``store=false``; reasoning models are asked for
``reasoning.encrypted_content`` and their reasoning items are replayed item by item (see
``tether.models.wire.openai_responses``). Needs the ``openai`` SDK: ``pip install 'tether[openai]'``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar, cast

from tether.models._sdk import require

require("openai", "openai", "the OpenAI Responses driver")

import openai  # noqa: E402  (after the MissingExtra check above)

from tether.errors import ModelError, UserError  # noqa: E402
from tether.messages import Message  # noqa: E402
from tether.models._base import ModelResponse, ModelSettings, Profile, ToolDefinition  # noqa: E402
from tether.models._driver import Driver, api_key, decode_body, sdk_error  # noqa: E402
from tether.models._limits import OPENAI_LIMITS, apply_limits  # noqa: E402
from tether.models.wire._common import ConversionReport  # noqa: E402
from tether.models.wire._json import given  # noqa: E402
from tether.models.wire.openai_responses import (  # noqa: E402
    REASONING_FAMILIES,
    StreamAccumulator,
    decode_response,
    default_profile,
    encode_messages,
    encode_tools,
)

__all__ = ["PROFILES", "OpenAIResponsesModel", "responses_profile"]

PROFILES: tuple[Profile, ...] = (
    default_profile(""),  # any non-reasoning model: reasoning items are never sent
    *(apply_limits(default_profile(family), OPENAI_LIMITS, family) for family in REASONING_FAMILIES),
)

_PROVIDER_LABEL = "openai"
_OWNED_KEYS = frozenset({"input", "store", "include", "stream", "previous_response_id"})
"""Body keys ``ModelSettings.extra`` may not override: the driver is stateless (``store=false``,
no ``previous_response_id``), asks for encrypted reasoning, and sends the whole history."""


def responses_profile(model: str) -> Profile:
    """The capability profile of a Responses model name, with the token limits OpenAI publishes."""
    return apply_limits(default_profile(model), OPENAI_LIMITS, model)


class OpenAIResponsesModel(Driver):
    """A model behind the OpenAI Responses API.

    ``client`` may be a ready ``openai.AsyncOpenAI`` (the caller's: never closed by the driver);
    otherwise one is created on first use from ``api_key`` (default ``OPENAI_API_KEY``),
    ``base_url``, ``http_client`` (the caller's: left open) and ``max_retries`` (the SDK's retry
    policy applies). ``profile`` overrides the capability profile derived from the model name;
    ``context_window`` and ``max_output_tokens`` override its token limits. ``await
    model.aclose()`` (or ``async with model``) closes what the driver created.
    """

    _provider = _PROVIDER_LABEL
    _stream_end: ClassVar[str] = "the response completed"
    _failures: ClassVar[tuple[type[BaseException], ...]] = (openai.APIError,)

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
        context_window: int | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        if not model:
            raise UserError("OpenAIResponsesModel needs a model name, e.g. 'gpt-5'")
        self._model = model
        super().__init__(
            profile=profile or responses_profile(model),
            client=client,
            context_window=context_window,
            max_output_tokens=max_output_tokens,
        )
        self._api_key = api_key
        self._base_url = base_url
        self._http_client = http_client
        self._max_retries = max_retries

    @property
    def name(self) -> str:
        return f"openai-responses:{self._model}"

    def _new_client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=api_key(
                self._api_key,
                "the OpenAI Responses driver",
                "OPENAI_API_KEY",
                default=None if self._base_url is None else "not-needed",
            ),
            base_url=self._base_url,
            http_client=self._http_client,
            max_retries=self._max_retries,
        )

    async def _close_client(self, client: openai.AsyncOpenAI) -> None:
        if self._http_client is None:  # the SDK closes its HTTP client, which is ours only then
            await client.close()

    def request(
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

    request_body = request
    """The same as :meth:`request` (its earlier name)."""

    def _error(self, exc: BaseException) -> ModelError:
        return sdk_error(exc, openai.APIStatusError, _PROVIDER_LABEL)

    async def _send(self, request: dict[str, Any], settings: ModelSettings | None) -> bytes:
        # The body goes through extra_body verbatim so the SDK does not re-shape items
        # (encrypted reasoning must arrive byte for byte).
        raw = await self._sdk().responses.with_raw_response.create(
            stream=False, extra_body=request, timeout=_timeout(settings)
        )
        content: bytes = raw.content
        return content

    def _decode_raw(self, raw: bytes, report: ConversionReport) -> ModelResponse:
        return decode_body(
            raw, _PROVIDER_LABEL, lambda body: _failed(decode_response(body, report=report), body)
        )

    @asynccontextmanager
    async def _open_stream(
        self, request: dict[str, Any], settings: ModelSettings | None
    ) -> AsyncGenerator[AsyncIterator[Mapping[str, Any]]]:
        async with self._sdk().responses.with_streaming_response.create(
            stream=True, extra_body=request, timeout=_timeout(settings)
        ) as response:
            yield _events(response.iter_lines())

    def _accumulator(self) -> StreamAccumulator:
        return StreamAccumulator()

    def _finish(self, response: ModelResponse, accumulator: Any) -> ModelResponse:
        return _failed(response, cast(StreamAccumulator, accumulator).response)


async def _events(lines: AsyncIterator[str]) -> AsyncIterator[Mapping[str, Any]]:
    """The JSON events of a server-sent event stream; an ``error`` event raises ``ModelError``."""
    async for line in lines:
        event = _sse_data(line)
        if event is None:
            continue
        if event.get("type") == "error":
            raise ModelError(f"{_PROVIDER_LABEL} stream error: {event}", stage="model")
        yield event


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


def _failed(response: ModelResponse, body: Mapping[str, Any]) -> ModelResponse:
    """``response``, unless the API said the response failed: then ``ModelError`` with its error."""
    if response.stop_reason == "error":
        raise ModelError(f"{_PROVIDER_LABEL} response failed: {body.get('error')}", stage="model")
    return response
