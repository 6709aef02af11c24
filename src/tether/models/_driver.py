"""Plumbing the SDK drivers share: the API key lookup, SDK errors → ``ModelHTTPError`` /
``ModelError``, a raw JSON body → ``ModelResponse``, and the end of a stream. Provider-specific
choices stay in each driver."""

from __future__ import annotations

import logging
import os
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import msgspec

from tether.errors import DecodeError, ModelError, ModelHTTPError, UserError
from tether.messages import Message
from tether.models._base import ModelResponse, Profile
from tether.models.wire._common import ConversionReport, check_content

__all__ = [
    "RequestReports",
    "api_key",
    "decode_body",
    "http_error",
    "request_failed",
    "sdk_error",
    "stream_result",
]

_log = logging.getLogger("tether.models")


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


_Logged = tuple["weakref.ReferenceType[Message]", set[tuple[int | None, str]]]


class RequestReports:
    """What a driver's requests could not carry (ADR 0005): the latest request's
    :class:`~tether.models.wire.ConversionReport`, and one WARNING on the ``tether.models`` logger
    per (message, part, what), so the steps of a run, which resend the same history, do not repeat
    a loss already told. Messages are tracked by identity and forgotten with them."""

    def __init__(self) -> None:
        self.last: ConversionReport | None = None
        self._logged: dict[int, _Logged] = {}

    def record(self, driver: str, messages: Sequence[Message], report: ConversionReport) -> None:
        """Keep ``report`` as the latest and log the losses not logged before."""
        self.last = report
        for loss in report.losses:
            if not 0 <= loss.message < len(messages):  # pragma: no cover - encoders index messages
                continue
            message = messages[loss.message]
            entry = self._logged.get(id(message))
            if entry is None or entry[0]() is not message:
                entry = self._logged[id(message)] = (weakref.ref(message, self._forget(id(message))), set())
            key = (loss.part, loss.what)
            if key in entry[1]:
                continue
            entry[1].add(key)
            where = "" if loss.part is None else f" part {loss.part}"
            _log.warning(
                "%s request %s message %d%s %s: %s",
                driver,
                loss.kind,
                loss.message,
                where,
                loss.what,
                loss.reason,
            )

    def _forget(self, key: int) -> Callable[[weakref.ReferenceType[Message]], None]:
        def forget(ref: weakref.ReferenceType[Message]) -> None:
            current = self._logged.get(key)
            if current is not None and current[0] is ref:
                del self._logged[key]

        return forget


Encoder = Callable[..., tuple[list[dict[str, Any]], ConversionReport]]


class Driver(ABC):
    """What every driver shares: its profile, the report of its latest request, and the one way
    a request's messages go onto the wire."""

    _profile: Profile
    _reports: RequestReports

    @property
    @abstractmethod
    def name(self) -> str:
        """``provider:model``."""

    def _wire(self, messages: Sequence[Message], encode: Encoder) -> list[dict[str, Any]]:
        """Check ``messages`` against the profile (``UnsupportedContent`` before any I/O), encode
        them with the driver's wire module, and record what the encoding could not carry."""
        check_content(messages, self._profile)
        encoded, report = encode(messages, profile=self._profile)
        self._reports.record(self.name, messages, report)
        return encoded

    @property
    def profile(self) -> Profile:
        """The capability profile requests are checked against before any I/O."""
        return self._profile

    @property
    def last_request_report(self) -> ConversionReport | None:
        """What the latest request built by this driver dropped or approximated (message and part
        indices into the messages it was given), or ``None`` before the first request. Each loss
        is also logged once at WARNING on the ``tether.models`` logger."""
        return self._reports.last
