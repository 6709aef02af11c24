"""OpenAI Chat Completions driver, through the official ``openai`` SDK (``tether[openai]``).

The same driver talks to any OpenAI-compatible server: pass ``base_url`` (and a ``provider`` label
such as ``"ollama"``, ``"vllm"``, ``"llama-cpp"`` or ``"groq"`` to pick its capability profile)::

    OpenAIChatModel("gpt-4o")
    OpenAIChatModel("llama3.2", base_url="http://127.0.0.1:11434/v1", provider="ollama")

The wire format lives in :mod:`tether.models.wire.openai_chat`; this module owns the connection,
the request options, error mapping and streaming.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from tether.errors import ModelError, UserError
from tether.messages import Message
from tether.models._base import ModelResponse, ModelSettings, Profile, StreamEvent, ToolDefinition
from tether.models._driver import Driver, RequestReports, api_key, decode_body, sdk_error, stream_result
from tether.models._sdk import require
from tether.models.wire._common import best_profile
from tether.models.wire._json import given
from tether.models.wire.openai_chat import StreamAccumulator, decode_response, encode_messages

if TYPE_CHECKING:
    import httpx2
    import openai
else:
    openai = require("openai", "openai", "the OpenAI Chat driver")

__all__ = ["PROFILES", "OpenAIChatModel", "chat_profile"]

PROFILES: tuple[Profile, ...] = (
    Profile("openai", images=True, image_urls=True, documents=True, document_urls=False),
    Profile("openai", family="gpt-3.5", images=False, image_urls=False),
    Profile("groq", images=True, image_urls=True),
    Profile("ollama", images=True, image_urls=False),
    Profile("vllm", images=True, image_urls=True),
    Profile("llama-cpp", images=False, image_urls=False, parallel_tool_calls=False),
    Profile("openai-compatible", images=True, image_urls=True),
)
"""What each target takes. A model name picks the profile of its provider whose ``family`` is its
longest prefix (``""`` matches every model). Reasoning is never replayed on Chat Completions."""


def chat_profile(provider: str, model: str) -> Profile:
    """The declared profile for ``model`` at ``provider``; unknown providers get the generic
    OpenAI-compatible profile relabelled with their name."""
    own = (profile for profile in PROFILES if profile.provider == provider)
    return best_profile(own, model, Profile(provider, images=True, image_urls=True))


def _tool_json(tool: ToolDefinition) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters}
    if tool.description:
        function["description"] = tool.description
    if tool.strict is not None:
        function["strict"] = tool.strict
    return {"type": "function", "function": function}


class OpenAIChatModel(Driver):
    """A model behind the Chat Completions API.

    ``client`` may be a ready ``openai.AsyncOpenAI``; otherwise one is created on first use from
    ``api_key`` (default ``OPENAI_API_KEY``; servers given by ``base_url`` need none), ``base_url``,
    ``http_client``, ``max_retries`` (the SDK's retry policy) and ``default_headers`` (sent with every
    request). ``profile`` overrides the declared
    capability profile. ``stream_usage`` asks for the final usage chunk when streaming.
    """

    def __init__(
        self,
        model: str,
        *,
        provider: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        http_client: httpx2.AsyncClient | None = None,
        max_retries: int = 2,
        default_headers: Mapping[str, str] | None = None,
        profile: Profile | None = None,
        stream_usage: bool = True,
    ) -> None:
        if not model:
            raise UserError("OpenAIChatModel needs a model name")
        self._model = model
        self._provider = provider or ("openai" if base_url is None else "openai-compatible")
        self._profile = profile or chat_profile(self._provider, model)
        self._base_url = base_url
        self._api_key = api_key
        self._client = client
        self._http_client = http_client
        self._max_retries = max_retries
        self._headers = dict(default_headers) if default_headers else None
        self._stream_usage = stream_usage
        self._reports = RequestReports()

    @property
    def name(self) -> str:
        """``provider:model``."""
        return f"{self._provider}:{self._model}"

    def _sdk(self) -> openai.AsyncOpenAI:
        if self._client is None:
            key = api_key(
                self._api_key,
                "the OpenAI Chat driver",
                "OPENAI_API_KEY",
                # local OpenAI-compatible servers take any key
                default=None if self._base_url is None else "not-needed",
            )
            self._client = openai.AsyncOpenAI(
                api_key=key,
                base_url=self._base_url,
                http_client=self._http_client,
                max_retries=self._max_retries,
                default_headers=self._headers,
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
        """The keyword arguments of ``chat.completions.create`` for this call (no I/O).

        Raises ``UnsupportedContent`` for a part the profile cannot take."""
        encoded = self._wire(messages, encode_messages)
        wire: list[dict[str, Any]] = []
        if instructions:
            wire.append({"role": "system", "content": instructions})
        wire.extend(encoded)
        kwargs: dict[str, Any] = {"model": self._model, "messages": wire}
        s = settings or ModelSettings()
        extra = dict(s.extra)
        if tools:
            kwargs["tools"] = [_tool_json(t) for t in tools]
            # explicit "auto" (the OpenAI default): llama.cpp's function-calling handler ignores
            # tools without it
            kwargs["tool_choice"] = extra.pop("tool_choice", "auto")
        if s.max_tokens is not None:
            kwargs["max_completion_tokens" if self._provider == "openai" else "max_tokens"] = s.max_tokens
        kwargs.update(given(temperature=s.temperature, top_p=s.top_p, seed=s.seed))
        if s.stop:
            kwargs["stop"] = list(s.stop)
        if tools and s.parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = s.parallel_tool_calls
        if s.timeout is not None:
            kwargs["timeout"] = s.timeout
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def _error(self, exc: Exception) -> ModelError:
        return sdk_error(exc, openai.APIStatusError, self._provider)

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """One non-streamed request."""
        kwargs = self.request(messages, instructions=instructions, tools=tools, settings=settings)
        create: Any = self._sdk().chat.completions.with_raw_response.create
        try:
            raw = await create(**kwargs)
        except openai.APIError as exc:
            raise self._error(exc) from exc
        return decode_body(raw.content, self._provider, partial(decode_response, provider=self._provider))

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """One streamed request: deltas, then the same ``ModelResponse`` ``generate`` would give.

        A stream that ends without a finish reason (the server went away) raises ``ModelError``;
        cancelling the consumer closes the HTTP stream."""
        kwargs = self.request(messages, instructions=instructions, tools=tools, settings=settings)
        if self._stream_usage:
            kwargs["stream_options"] = {"include_usage": True}
        create: Any = self._sdk().chat.completions.create
        accumulator = StreamAccumulator(provider=self._provider)
        try:
            chunks = await create(**kwargs, stream=True)
        except openai.APIError as exc:
            raise self._error(exc) from exc
        try:
            async for chunk in chunks:
                for event in accumulator.feed(chunk.model_dump(exclude_unset=True)):
                    yield event
        except openai.APIError as exc:
            raise self._error(exc) from exc
        finally:
            await chunks.close()
        yield stream_result(accumulator, self._provider, end="a finish reason")
