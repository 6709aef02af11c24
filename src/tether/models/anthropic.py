"""Anthropic Messages driver, through the official ``anthropic`` SDK (``tether[anthropic]``)::

    AnthropicModel("claude-sonnet-4-5")
    AnthropicModel("claude-sonnet-4-5", thinking={"type": "enabled", "budget_tokens": 2048})

The wire format lives in :mod:`tether.models.wire.anthropic`; this module owns the connection,
the request options, error mapping and streaming. Signed thinking is replayed unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from tether.errors import ModelError, UserError
from tether.messages import Message
from tether.models._base import ModelResponse, ModelSettings, Profile, ToolDefinition
from tether.models._driver import Driver, api_key, decode_body, sdk_error
from tether.models._limits import ANTHROPIC_LIMITS, apply_limits
from tether.models._sdk import require
from tether.models.wire import anthropic as wire
from tether.models.wire._common import ConversionReport
from tether.models.wire._json import given
from tether.models.wire.anthropic import PROVIDER, StreamAccumulator, decode_response, encode_messages

if TYPE_CHECKING:
    import anthropic
else:
    anthropic = require("anthropic", "anthropic", "the Anthropic driver")

__all__ = ["PROFILES", "AnthropicModel", "profile_for"]

PROFILES: tuple[Profile, ...] = tuple(apply_limits(p, ANTHROPIC_LIMITS, p.family) for p in wire.PROFILES)
"""The wire mapping's capability profiles (:data:`tether.models.wire.anthropic.PROFILES`) with
the token limits Anthropic publishes for each family."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` is required by the Messages API; this is sent when settings give none."""


def profile_for(model: str) -> Profile:
    """The capability profile of an Anthropic model name (longest family prefix wins), with the
    token limits Anthropic publishes for that model."""
    return apply_limits(wire.profile_for(model), ANTHROPIC_LIMITS, model)


def _tool_json(tool: ToolDefinition) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": tool.name, "input_schema": tool.parameters}
    if tool.description:
        entry["description"] = tool.description
    if tool.strict is not None:
        entry["strict"] = tool.strict
    return entry


class AnthropicModel(Driver):
    """A Claude model behind the Anthropic Messages API.

    ``client`` may be a ready ``anthropic.AsyncAnthropic`` (the caller's: never closed by the
    driver); otherwise one is created on first use from ``api_key`` (default
    ``ANTHROPIC_API_KEY``), ``base_url``, ``http_client`` (the caller's: left open) and
    ``max_retries`` (the SDK's retry policy). ``thinking`` is sent as the request's ``thinking``
    option (e.g. ``{"type": "enabled", "budget_tokens": 2048}``). ``profile`` overrides the
    declared capability profile; ``context_window`` and ``max_output_tokens`` override its token
    limits. ``await model.aclose()`` (or ``async with model``) closes what the driver created.
    """

    _provider = PROVIDER
    _stream_end: ClassVar[str] = "message_stop"
    _failures: ClassVar[tuple[type[BaseException], ...]] = (anthropic.APIError,)

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
        context_window: int | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        if not model:
            raise UserError("AnthropicModel needs a model name")
        self._model = model
        super().__init__(
            profile=profile or profile_for(model),
            client=client,
            context_window=context_window,
            max_output_tokens=max_output_tokens,
        )
        self._api_key = api_key
        self._base_url = base_url
        self._http_client = http_client
        self._max_retries = max_retries
        self._thinking = thinking

    @property
    def name(self) -> str:
        """``anthropic:model``."""
        return f"{PROVIDER}:{self._model}"

    def _new_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=api_key(self._api_key, "the Anthropic driver", "ANTHROPIC_API_KEY"),
            base_url=self._base_url,
            http_client=self._http_client,
            max_retries=self._max_retries,
        )

    async def _close_client(self, client: anthropic.AsyncAnthropic) -> None:
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

    def _error(self, exc: BaseException) -> ModelError:
        return sdk_error(exc, anthropic.APIStatusError, PROVIDER)

    async def _send(self, request: dict[str, Any], settings: ModelSettings | None) -> bytes:
        """The raw JSON body is decoded (not the SDK's objects), so signatures stay verbatim."""
        create: Any = self._sdk().messages.with_raw_response.create
        raw = await create(**request)
        body: bytes = await raw.read()
        return body

    def _decode_raw(self, raw: bytes, report: ConversionReport) -> ModelResponse:
        return decode_body(raw, PROVIDER, lambda body: decode_response(body, report=report))

    @asynccontextmanager
    async def _open_stream(
        self, request: dict[str, Any], settings: ModelSettings | None
    ) -> AsyncGenerator[AsyncIterator[Mapping[str, Any]]]:
        create: Any = self._sdk().messages.create
        events = await create(**request, stream=True)
        try:
            yield (event.model_dump(mode="json", exclude_unset=True) async for event in events)
        finally:
            await events.close()

    def _accumulator(self) -> StreamAccumulator:
        return StreamAccumulator()
