"""Google Gemini driver, through the official ``google-genai`` SDK (``tether[google]``)::

    GeminiModel("gemini-2.5-flash")
    GeminiModel("gemini-2.5-pro", http_options={"base_url": "http://127.0.0.1:8080"})

The wire format lives in :mod:`tether.models.wire.gemini`; this module owns the connection, the
request options, error mapping and streaming. Thought signatures on calls and text are replayed
byte for byte (the SDK turns the base64 text back into the exact bytes it received).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import msgspec
import pydantic

from tether.errors import DecodeError, ModelError, ModelHTTPError, UserError
from tether.messages import Message
from tether.models._base import ModelResponse, ModelSettings, Profile, StreamEvent, ToolDefinition
from tether.models._driver import Driver, RequestReports, api_key, request_failed, stream_result
from tether.models._sdk import require
from tether.models.wire._json import given
from tether.models.wire.gemini import (
    PROFILES,
    PROVIDER,
    StreamAccumulator,
    decode_response,
    encode_messages,
    profile_for,
)

if TYPE_CHECKING:
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types
else:
    genai = require("google.genai", "google", "the Gemini driver")
    genai_errors = require("google.genai.errors", "google", "the Gemini driver")
    genai_types = require("google.genai.types", "google", "the Gemini driver")

__all__ = ["PROFILES", "GeminiModel", "profile_for"]

_STANDARD = str.maketrans("-_", "+/")
_part_adapter: pydantic.TypeAdapter[genai_types.Part] = pydantic.TypeAdapter(genai_types.Part)
_PART_CACHE_LIMIT = 100_000


class _SdkParts:
    """Wire part dicts → SDK ``Part`` objects, cached by the identity of the (cached, read-only)
    wire dict so each step converts only new parts. Entries hold the wire dict itself, so an id
    is never reused while cached; the cache is cleared when it grows past its limit."""

    def __init__(self) -> None:
        self._parts: dict[int, tuple[dict[str, Any], genai_types.Part]] = {}

    def contents(self, turns: list[dict[str, Any]]) -> list[genai_types.Content]:
        if len(self._parts) > _PART_CACHE_LIMIT:
            self._parts.clear()
        out: list[genai_types.Content] = []
        for turn in turns:
            parts: list[genai_types.Part] = []
            for wire in cast(list[dict[str, Any]], turn["parts"]):
                hit = self._parts.get(id(wire))
                if hit is None or hit[0] is not wire:
                    # JSON validation turns base64 text (either alphabet) into the exact bytes
                    hit = self._parts[id(wire)] = (
                        wire,
                        _part_adapter.validate_json(msgspec.json.encode(wire)),
                    )
                parts.append(hit[1])
            out.append(genai_types.Content.model_construct(role=turn["role"], parts=parts))  # parts are valid
        return out


def _tools(tools: Sequence[ToolDefinition]) -> list[genai_types.Tool]:
    declarations = [
        genai_types.FunctionDeclaration(
            name=t.name, description=t.description or None, parameters_json_schema=t.parameters
        )
        for t in tools
    ]
    return [genai_types.Tool(function_declarations=declarations)]


def _dump(response: pydantic.BaseModel) -> dict[str, Any]:
    """An SDK response as the REST JSON body the API sent: camelCase, and signatures in the
    standard base64 alphabet the API uses (pydantic writes the SDK's bytes URL-safe)."""
    body: dict[str, Any] = response.model_dump(mode="json", by_alias=True, exclude_none=True)
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

    ``client`` may be a ready ``google.genai.Client``; otherwise one is created on first use from
    ``api_key`` (default ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY``) and ``http_options`` (a
    ``google.genai.types.HttpOptions`` or its dict: ``base_url``, ``httpx_async_client``, retry
    options…). ``ModelSettings.extra`` is merged into ``GenerateContentConfig`` (e.g.
    ``{"thinking_config": {"include_thoughts": True}}``). ``profile`` overrides the declared one.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        client: genai.Client | None = None,
        http_options: genai_types.HttpOptions | dict[str, Any] | None = None,
        profile: Profile | None = None,
    ) -> None:
        if not model:
            raise UserError("GeminiModel needs a model name")
        self._model = model
        self._profile = profile or profile_for(model)
        self._api_key = api_key
        self._client = client
        self._http_options = http_options
        self._parts = _SdkParts()
        self._reports = RequestReports()

    @property
    def name(self) -> str:
        """``google:model``."""
        return f"{PROVIDER}:{self._model}"

    def _sdk(self) -> genai.Client:
        if self._client is None:
            key = api_key(self._api_key, "the Gemini driver", "GEMINI_API_KEY", "GOOGLE_API_KEY")
            options: Any = self._http_options
            self._client = genai.Client(api_key=key, http_options=options)
        return self._client

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
        encoded = self._wire(messages, encode_messages)
        contents = self._parts.contents(encoded)
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

    def _error(self, exc: Exception) -> ModelError:
        if isinstance(exc, genai_errors.APIError):
            details: Any = exc.details  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            body = msgspec.json.encode(details).decode() if details is not None else str(exc)
            return ModelHTTPError(exc.message or str(exc), status=exc.code, provider=PROVIDER, body=body)
        return request_failed(exc, PROVIDER)

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
        try:
            models: Any = self._sdk().aio.models  # the SDK's content union is partly untyped
            response: genai_types.GenerateContentResponse = await models.generate_content(**kwargs)
        except Exception as exc:  # APIError → ModelHTTPError; transport failures → ModelError
            raise self._error(exc) from exc
        try:
            return decode_response(_dump(response))
        except DecodeError as exc:
            raise ModelError(f"{PROVIDER} returned a malformed response: {exc}", stage="model") from exc

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """One streamed request: deltas, then the same ``ModelResponse`` ``generate`` would give.

        A stream that ends before a ``finishReason`` raises ``ModelError``; cancelling the
        consumer closes the HTTP stream."""
        kwargs = self.request(messages, instructions=instructions, tools=tools, settings=settings)
        accumulator = StreamAccumulator()
        try:
            models: Any = self._sdk().aio.models
            chunks: Any = await models.generate_content_stream(**kwargs)
        except Exception as exc:
            raise self._error(exc) from exc
        try:
            async for chunk in chunks:
                for event in accumulator.feed(_dump(chunk)):
                    yield event
        except DecodeError as exc:
            raise ModelError(f"{PROVIDER} streamed a malformed chunk: {exc}", stage="model") from exc
        except Exception as exc:
            raise self._error(exc) from exc
        finally:
            await chunks.aclose()
        yield stream_result(accumulator, PROVIDER, end="a finish reason")
