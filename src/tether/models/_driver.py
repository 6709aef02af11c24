"""Plumbing the SDK drivers share: the API key lookup, SDK errors → ``ModelHTTPError`` /
``ModelError``, a raw JSON body → ``ModelResponse``, and the end of a stream. Provider-specific
choices stay in each driver."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol, cast

import msgspec

from tether.errors import DecodeError, ModelError, ModelHTTPError, UserError
from tether.models._base import ModelResponse

__all__ = ["api_key", "decode_body", "http_error", "request_failed", "sdk_error", "stream_result"]


class _StatusError(Protocol):
    """What the Stainless-generated SDKs (``openai``, ``anthropic``) put on ``APIStatusError``."""

    @property
    def message(self) -> str: ...
    @property
    def status_code(self) -> int: ...
    @property
    def response(self) -> Any: ...
    @property
    def body(self) -> object: ...


class _Accumulator(Protocol):
    @property
    def finished(self) -> bool: ...
    def result(self) -> ModelResponse: ...


def api_key(explicit: str | None, driver: str, *env: str, default: str | None = None) -> str:
    """``explicit or $ENV_1 or $ENV_2 …``; when that is ``None`` (nothing set), ``default``; with no
    default, ``UserError`` naming the first variable and ``driver`` (``"the Anthropic driver"``)."""
    key = explicit
    for name in env:
        key = key or os.environ.get(name)
    if key is None:
        key = default
    if key is None:
        raise UserError(f"{driver} needs an API key: set {env[0]} or pass api_key=")
    return key


def http_error(exc: _StatusError, provider: str) -> ModelHTTPError:
    """An SDK ``APIStatusError`` as ``ModelHTTPError``, keeping the response body text."""
    try:
        body = cast(str, exc.response.text)
    except Exception:  # a streamed error body may be unread
        body = str(exc.body)
    return ModelHTTPError(exc.message, status=exc.status_code, provider=provider, body=body)


def request_failed(exc: BaseException, provider: str) -> ModelError:
    """A request that failed without an HTTP status (connection, timeout, SDK error)."""
    return ModelError(f"{provider} request failed: {exc}", stage="model")


def sdk_error(exc: Exception, status_error: type[Exception], provider: str) -> ModelError:
    """``http_error`` for an instance of the SDK's ``status_error`` class, else ``request_failed``."""
    if isinstance(exc, status_error):
        return http_error(cast(_StatusError, exc), provider)
    return request_failed(exc, provider)


def decode_body(
    raw: bytes | str, provider: str, decode: Callable[[dict[str, Any]], ModelResponse]
) -> ModelResponse:
    """A raw JSON response body → ``decode(body)``; anything malformed raises ``ModelError``."""
    try:
        body = msgspec.json.decode(raw)
        if not isinstance(body, dict):
            raise DecodeError("response body is not a JSON object", path="$")
        return decode(cast(dict[str, Any], body))
    except (msgspec.DecodeError, DecodeError) as exc:
        raise ModelError(f"{provider} returned a malformed response: {exc}", stage="model") from exc


def stream_result(accumulator: _Accumulator, provider: str, *, end: str) -> ModelResponse:
    """The response a finished stream assembled. A stream cut before ``end`` (what marks a
    complete stream, e.g. ``"message_stop"``) or one that does not decode raises ``ModelError``."""
    if not accumulator.finished:
        raise ModelError(f"{provider} stream ended before {end}", stage="model")
    try:
        return accumulator.result()
    except DecodeError as exc:
        raise ModelError(f"{provider} streamed a malformed response: {exc}", stage="model") from exc
