"""OpenAI Chat Completions driver, through the official ``openai`` SDK (``tether[openai]``).

The same driver talks to any OpenAI-compatible server: pass ``base_url`` (and a ``provider`` label
such as ``"ollama"``, ``"vllm"``, ``"llama-cpp"`` or ``"groq"`` to pick its capability profile)::

    OpenAIChatModel("gpt-4o")
    OpenAIChatModel("llama3.2", base_url="http://127.0.0.1:11434/v1", provider="ollama")

The wire format lives in :mod:`tether.models.wire.openai_chat`; this module owns the connection,
the request options, error mapping and streaming.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from tether.errors import ModelError, UserError
from tether.messages import Message
from tether.models._base import ModelResponse, ModelSettings, Profile, ToolDefinition
from tether.models._driver import Driver, api_key, decode_body, sdk_error
from tether.models._limits import OPENAI_LIMITS, apply_limits
from tether.models._sdk import require
from tether.models.wire._common import ConversionReport, best_profile
from tether.models.wire._json import given
from tether.models.wire.openai_chat import StreamAccumulator, decode_response, encode_messages

if TYPE_CHECKING:
    import httpx2
    import openai
else:
    openai = require("openai", "openai", "the OpenAI Chat driver")

__all__ = ["PROFILES", "OpenAIChatModel", "chat_profile"]

_DECLARED: tuple[Profile, ...] = (
    Profile("openai", images=True, image_urls=True, documents=True, document_urls=False),
    Profile("openai", family="gpt-3.5", images=False, image_urls=False),
    Profile("groq", images=True, image_urls=True),
    Profile("ollama", images=True, image_urls=False),
    Profile("vllm", images=True, image_urls=True),
    Profile("llama-cpp", images=False, image_urls=False, parallel_tool_calls=False),
    Profile("openai-compatible", images=True, image_urls=True),
)

PROFILES: tuple[Profile, ...] = tuple(
    apply_limits(p, OPENAI_LIMITS, p.family) if p.provider == "openai" and p.family else p for p in _DECLARED
)
"""What each target takes. A model name picks the profile of its provider whose ``family`` is its
longest prefix (``""`` matches every model). Reasoning is never replayed on Chat Completions.
OpenAI models get the token limits OpenAI publishes for them (``tether.models._limits``); other
servers' limits depend on the model they serve and are left unknown."""


def chat_profile(provider: str, model: str) -> Profile:
    """The declared profile for ``model`` at ``provider`` (with OpenAI's published token limits
    for OpenAI models); unknown providers get the generic OpenAI-compatible profile relabelled
    with their name."""
    own = (profile for profile in _DECLARED if profile.provider == provider)
    profile = best_profile(own, model, Profile(provider, images=True, image_urls=True))
    return apply_limits(profile, OPENAI_LIMITS, model) if provider == "openai" else profile


def _tool_json(tool: ToolDefinition) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters}
    if tool.description:
        function["description"] = tool.description
    if tool.strict is not None:
        function["strict"] = tool.strict
    return {"type": "function", "function": function}


class OpenAIChatModel(Driver):
    """A model behind the Chat Completions API.

    ``client`` may be a ready ``openai.AsyncOpenAI`` (the caller's: never closed by the driver);
    otherwise one is created on first use from ``api_key`` (default ``OPENAI_API_KEY``; servers
    given by ``base_url`` need none), ``base_url``, ``http_client`` (the caller's: left open),
    ``max_retries`` (the SDK's retry policy) and ``default_headers`` (sent with every request).
    ``profile`` overrides the declared capability profile; ``context_window`` and
    ``max_output_tokens`` override its token limits. ``stream_usage`` asks for the final usage
    chunk when streaming. ``await model.aclose()`` (or ``async with model``) closes what the
    driver created.
    """

    _failures: ClassVar[tuple[type[BaseException], ...]] = (openai.APIError,)

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
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        stream_usage: bool = True,
    ) -> None:
        if not model:
            raise UserError("OpenAIChatModel needs a model name")
        self._model = model
        self._provider = provider or ("openai" if base_url is None else "openai-compatible")
        super().__init__(
            profile=profile or chat_profile(self._provider, model),
            client=client,
            context_window=context_window,
            max_output_tokens=max_output_tokens,
        )
        self._base_url = base_url
        self._api_key = api_key
        self._http_client = http_client
        self._max_retries = max_retries
        self._headers = dict(default_headers) if default_headers else None
        self._stream_usage = stream_usage

    @property
    def name(self) -> str:
        """``provider:model``."""
        return f"{self._provider}:{self._model}"

    def _new_client(self) -> openai.AsyncOpenAI:
        key = api_key(
            self._api_key,
            "the OpenAI Chat driver",
            "OPENAI_API_KEY",
            # local OpenAI-compatible servers take any key
            default=None if self._base_url is None else "not-needed",
        )
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=self._base_url,
            http_client=self._http_client,
            max_retries=self._max_retries,
            default_headers=self._headers,
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

    def _error(self, exc: BaseException) -> ModelError:
        return sdk_error(exc, openai.APIStatusError, self._provider)

    async def _send(self, request: dict[str, Any], settings: ModelSettings | None) -> bytes:
        create: Any = self._sdk().chat.completions.with_raw_response.create
        raw = await create(**request)
        content: bytes = raw.content
        return content

    def _decode_raw(self, raw: bytes, report: ConversionReport) -> ModelResponse:
        return decode_body(
            raw, self._provider, lambda body: decode_response(body, provider=self._provider, report=report)
        )

    @asynccontextmanager
    async def _open_stream(
        self, request: dict[str, Any], settings: ModelSettings | None
    ) -> AsyncGenerator[AsyncIterator[Mapping[str, Any]]]:
        create: Any = self._sdk().chat.completions.create
        if self._stream_usage:
            request = {**request, "stream_options": {"include_usage": True}}
        chunks = await create(**request, stream=True)
        try:
            yield (chunk.model_dump(exclude_unset=True) async for chunk in chunks)
        finally:
            await chunks.close()

    def _accumulator(self) -> StreamAccumulator:
        return StreamAccumulator(provider=self._provider)
