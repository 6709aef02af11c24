"""Anthropic Messages driver, through the official ``anthropic`` SDK (``tether[anthropic]``)::

    AnthropicModel("claude-sonnet-4-5")
    AnthropicModel("claude-sonnet-4-5", thinking={"type": "enabled", "budget_tokens": 2048})

The wire format lives in :mod:`tether.models.wire.anthropic`; this module owns the connection,
the request options, error mapping and streaming. Signed thinking is replayed unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from tether.errors import DecodeError, ModelError, UserError
from tether.messages import Message
from tether.models._base import ModelResponse, ModelSettings, Profile, StreamEvent, ToolDefinition
from tether.models._driver import Driver, RequestReports, api_key, decode_body, sdk_error, stream_result
from tether.models._sdk import require
from tether.models.wire._json import given
from tether.models.wire.anthropic import (
    PROFILES,
    PROVIDER,
    StreamAccumulator,
    decode_response,
    encode_messages,
    profile_for,
)

if TYPE_CHECKING:
    import anthropic
else:
    anthropic = require("anthropic", "anthropic", "the Anthropic driver")

__all__ = ["PROFILES", "AnthropicModel", "profile_for"]

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` is required by the Messages API; this is sent when settings give none."""


def _tool_json(tool: ToolDefinition) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": tool.name, "input_schema": tool.parameters}
    if tool.description:
        entry["description"] = tool.description
    if tool.strict is not None:
        entry["strict"] = tool.strict
    return entry


def _error(exc: Exception) -> ModelError:
    return sdk_error(exc, anthropic.APIStatusError, PROVIDER)


class AnthropicModel(Driver):
    """A Claude model behind the Anthropic Messages API.

    ``client`` may be a ready ``anthropic.AsyncAnthropic``; otherwise one is created on first use
    from ``api_key`` (default ``ANTHROPIC_API_KEY``), ``base_url``, ``http_client`` and
    ``max_retries`` (the SDK's retry policy). ``thinking`` is sent as the request's ``thinking``
    option (e.g. ``{"type": "enabled", "budget_tokens": 2048}``). ``profile`` overrides the
    declared capability profile.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        http_client: Any = None,
        max_retries: int = 2,
        thinking: dict[str, Any] | None = None,
        profile: Profile | None = None,
    ) -> None:
        if not model:
            raise UserError("AnthropicModel needs a model name")
        self._model = model
        self._profile = profile or profile_for(model)
        self._api_key = api_key
        self._base_url = base_url
        self._client = client
        self._http_client = http_client
        self._max_retries = max_retries
        self._thinking = thinking
        self._reports = RequestReports()

    @property
    def name(self) -> str:
        """``anthropic:model``."""
        return f"{PROVIDER}:{self._model}"

    def _sdk(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            self._client = anthropic.AsyncAnthropic(
                api_key=api_key(self._api_key, "the Anthropic driver", "ANTHROPIC_API_KEY"),
                base_url=self._base_url,
                http_client=self._http_client,
                max_retries=self._max_retries,
            )
        return self._client

    def request(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for this call (no I/O).

        Raises ``UnsupportedContent`` for a part the profile cannot take."""
        encoded = self._wire(messages, encode_messages)
        s = settings or ModelSettings()
        kwargs: dict[str, Any] = {
            "model": self._model,
            "max_tokens": s.max_tokens if s.max_tokens is not None else DEFAULT_MAX_TOKENS,
            "messages": encoded,
        }
        if instructions:
            kwargs["system"] = instructions
        if tools:
            kwargs["tools"] = [_tool_json(t) for t in tools]
            if s.parallel_tool_calls is False:
                kwargs["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        if self._thinking is not None:
            kwargs["thinking"] = self._thinking
        if s.stop:
            kwargs["stop_sequences"] = list(s.stop)
        if s.timeout is not None:
            kwargs["timeout"] = s.timeout
        # Sampling options are not parameters of this SDK's ``create``: they travel in the body.
        extra = given(temperature=s.temperature, top_p=s.top_p)
        extra.update(s.extra)
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """One non-streamed request. The raw JSON body is decoded, so signatures stay verbatim."""
        kwargs = self.request(messages, instructions=instructions, tools=tools, settings=settings)
        create: Any = self._sdk().messages.with_raw_response.create
        try:
            raw = await create(**kwargs)
        except anthropic.APIError as exc:
            raise _error(exc) from exc
        return decode_body(await raw.read(), PROVIDER, decode_response)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """One streamed request: deltas, then the same ``ModelResponse`` ``generate`` would give.

        A stream that ends before ``message_stop`` raises ``ModelError``; an ``error`` event
        raises ``ModelHTTPError``; cancelling the consumer closes the HTTP stream."""
        kwargs = self.request(messages, instructions=instructions, tools=tools, settings=settings)
        create: Any = self._sdk().messages.create
        accumulator = StreamAccumulator()
        try:
            events = await create(**kwargs, stream=True)
        except anthropic.APIError as exc:
            raise _error(exc) from exc
        try:
            async for event in events:
                for delta in accumulator.feed(event.model_dump(mode="json", exclude_unset=True)):
                    yield delta
        except anthropic.APIError as exc:
            raise _error(exc) from exc
        except DecodeError as exc:
            raise ModelError(f"{PROVIDER} streamed a malformed event: {exc}", stage="model") from exc
        finally:
            await events.close()
        yield stream_result(accumulator, PROVIDER, end="message_stop")
