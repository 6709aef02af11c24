"""Google Gemini driver, through the official ``google-genai`` SDK (``tether[google]``)::

    GeminiModel("gemini-2.5-flash")
    GeminiModel("gemini-2.5-pro", http_options={"base_url": "http://127.0.0.1:8080"})

The wire format lives in :mod:`tether.models.wire.gemini`; this module owns the connection, the
request options, error mapping and streaming. Thought signatures on calls and text are replayed
byte for byte (the SDK turns the base64 text back into the exact bytes it received).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final, cast

import msgspec
import pydantic

from tether.errors import ModelError, ModelHTTPError, UserError
from tether.messages import Message
from tether.models._base import ModelResponse, ModelSettings, Profile, ToolDefinition
from tether.models._driver import Driver, api_key, request_failed
from tether.models._limits import GEMINI_LIMITS, apply_limits
from tether.models._sdk import require
from tether.models.wire import gemini as wire
from tether.models.wire._common import ConversionReport, merged_turns
from tether.models.wire._json import given
from tether.models.wire._memo import PerMessageCache
from tether.models.wire.gemini import PROVIDER, StreamAccumulator, decode_response, encode_per_message

if TYPE_CHECKING:
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types
else:
    genai = require("google.genai", "google", "the Gemini driver")
    genai_errors = require("google.genai.errors", "google", "the Gemini driver")
    genai_types = require("google.genai.types", "google", "the Gemini driver")

__all__ = ["PROFILES", "GeminiModel", "profile_for"]

PROFILES: tuple[Profile, ...] = tuple(apply_limits(p, GEMINI_LIMITS, p.family) for p in wire.PROFILES)
"""The wire mapping's capability profiles (:data:`tether.models.wire.gemini.PROFILES`) with the
token limits Google publishes for each family."""

_STANDARD: Final[Mapping[int, int]] = MappingProxyType({ord("-"): ord("+"), ord("_"): ord("/")})
_part_adapter: pydantic.TypeAdapter[genai_types.Part] = pydantic.TypeAdapter(genai_types.Part)
_NOT_BODY = frozenset({"sdk_http_response", "automatic_function_calling_history", "parsed"})
"""Fields of an SDK response that are not the API's JSON body (HTTP headers, SDK bookkeeping)."""


def profile_for(model: str) -> Profile:
    """The capability profile of a Gemini model name (longest family prefix wins), with the
    token limits Google publishes for that model."""
    return apply_limits(wire.profile_for(model), GEMINI_LIMITS, model)


def _tools(tools: Sequence[ToolDefinition]) -> list[genai_types.Tool]:
    declarations = [
        genai_types.FunctionDeclaration(
            name=t.name, description=t.description or None, parameters_json_schema=t.parameters
        )
        for t in tools
    ]
    return [genai_types.Tool(function_declarations=declarations)]


def _sdk_part(wire_part: Mapping[str, Any]) -> genai_types.Part:
    # JSON validation turns base64 text (either alphabet) into the exact bytes
    return _part_adapter.validate_json(msgspec.json.encode(wire_part))


def _dump(response: pydantic.BaseModel) -> dict[str, Any]:
    """An SDK response as the REST JSON body the API sent: camelCase, signatures in the standard
    base64 alphabet the API uses (pydantic writes the SDK's bytes URL-safe), and nothing the SDK
    adds about the HTTP exchange (its headers, e.g. ``date``, differ on every call)."""
    body: dict[str, Any] = response.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude=set(_NOT_BODY)
    )
    candidates = cast(list[dict[str, Any]], body.get("candidates") or [])
    for candidate in candidates:
        content = cast(dict[str, Any], candidate.get("content") or {})
        for part in cast(list[dict[str, Any]], content.get("parts") or []):
            signature = part.get("thoughtSignature")
            if isinstance(signature, str):
                part["thoughtSignature"] = signature.translate(_STANDARD)
    return body


class GeminiModel(Driver):
    """A Gemini model behind the Gemini Developer API (or Vertex AI, given a ready ``client``).

    ``client`` may be a ready ``google.genai.Client`` (the caller's: never closed by the driver);
    otherwise one is created on first use from ``api_key`` (default ``GEMINI_API_KEY`` /
    ``GOOGLE_API_KEY``) and ``http_options`` (a ``google.genai.types.HttpOptions`` or its dict:
    ``base_url``, ``httpx_async_client`` (the caller's: left open), retry options…).
    ``ModelSettings.extra`` is merged into ``GenerateContentConfig`` (e.g.
    ``{"thinking_config": {"include_thoughts": True}}``). ``profile`` overrides the declared one;
    ``context_window`` and ``max_output_tokens`` override its token limits. ``await
    model.aclose()`` (or ``async with model``) closes what the driver created.
    """

    _provider = PROVIDER
    _failures: ClassVar[tuple[type[BaseException], ...]] = (Exception,)
    """APIError → ModelHTTPError; transport failures → ModelError."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        client: genai.Client | None = None,
        http_options: genai_types.HttpOptions | dict[str, Any] | None = None,
        profile: Profile | None = None,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        if not model:
            raise UserError("GeminiModel needs a model name")
        self._model = model
        super().__init__(
            profile=profile or profile_for(model),
            client=client,
            context_window=context_window,
            max_output_tokens=max_output_tokens,
        )
        self._api_key = api_key
        self._http_options = http_options
        self._sdk_parts: PerMessageCache[tuple[genai_types.Part, ...]] = PerMessageCache()

    @property
    def name(self) -> str:
        """``google:model``."""
        return f"{PROVIDER}:{self._model}"

    def _new_client(self) -> genai.Client:
        key = api_key(self._api_key, "the Gemini driver", "GEMINI_API_KEY", "GOOGLE_API_KEY")
        options: Any = self._http_options
        return genai.Client(api_key=key, http_options=options)

    async def _close_client(self, client: genai.Client) -> None:
        # The SDK leaves an HTTP client given in http_options open and closes its own.
        try:
            await client.aio.aclose()
        finally:
            client.close()

    def _encode(
        self, messages: Sequence[Message], *, profile: Profile | None = None, cache: Any = None
    ) -> tuple[list[dict[str, Any]], ConversionReport]:
        """The wire encoding of each message, as SDK ``Part`` objects (converted once per message
        and kept with it in this driver), merged into turns."""
        target = profile or self._profile
        per_message = encode_per_message(messages, profile=target, cache=cache)
        table = self._sdk_parts.table(target)
        encoded: list[tuple[str, Sequence[Any], Sequence[Any]]] = []
        for message, (role, parts, losses) in zip(messages, per_message, strict=True):
            sdk = table.get_for(message)
            if sdk is None:
                sdk = tuple(_sdk_part(part) for part in parts)
                table.put(message, sdk)
            encoded.append((role, sdk, losses))
        return merged_turns(messages, encoded, key="parts", api="Gemini")

    def request(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments of ``models.generate_content`` for this call (no I/O).

        Raises ``UnsupportedContent`` for a part the profile cannot take."""
        turns = self._wire(messages, self._encode)
        contents = [
            genai_types.Content.model_construct(role=turn["role"], parts=turn["parts"])  # parts are valid
            for turn in turns
        ]
        s = settings or ModelSettings()
        config: dict[str, Any] = {}
        if instructions:
            config["system_instruction"] = instructions
        if tools:
            config["tools"] = _tools(tools)
            config["automatic_function_calling"] = {"disable": True}
        config.update(
            given(max_output_tokens=s.max_tokens, temperature=s.temperature, top_p=s.top_p, seed=s.seed)
        )
        if s.stop:
            config["stop_sequences"] = list(s.stop)
        if s.timeout is not None:
            config["http_options"] = {"timeout": int(s.timeout * 1000)}
        config.update(s.extra)
        return {
            "model": self._model,
            "contents": contents,
            "config": genai_types.GenerateContentConfig.model_validate(config),
        }

    def _error(self, exc: BaseException) -> ModelError:
        if isinstance(exc, genai_errors.APIError):
            details: Any = exc.details  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            body = msgspec.json.encode(details).decode() if details is not None else str(exc)
            return ModelHTTPError(exc.message or str(exc), status=exc.code, provider=PROVIDER, body=body)
        return request_failed(exc, PROVIDER)

    async def _send(self, request: dict[str, Any], settings: ModelSettings | None) -> dict[str, Any]:
        models: Any = self._sdk().aio.models  # the SDK's content union is partly untyped
        response: genai_types.GenerateContentResponse = await models.generate_content(**request)
        return _dump(response)

    def _decode_raw(self, raw: dict[str, Any], report: ConversionReport) -> ModelResponse:
        return decode_response(raw, report=report)

    @asynccontextmanager
    async def _open_stream(
        self, request: dict[str, Any], settings: ModelSettings | None
    ) -> AsyncGenerator[AsyncIterator[Mapping[str, Any]]]:
        models: Any = self._sdk().aio.models
        chunks: Any = await models.generate_content_stream(**request)
        try:
            yield (_dump(chunk) async for chunk in chunks)
        finally:
            await chunks.aclose()

    def _accumulator(self) -> StreamAccumulator:
        return StreamAccumulator()
