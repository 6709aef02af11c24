"""The ``Driver`` base every driver derives from, and the plumbing the SDK drivers share.

``Driver`` holds what is the same everywhere: the capability profile, the request reports, the
per-driver memos of the wire conversion, the SDK client's lifecycle (``aclose`` / ``async with``)
and the skeleton of ``generate`` and ``stream`` (template methods). A driver supplies only what
differs: how a request is built (``request``), sent (``_send``) and decoded (``_decode_raw``), how a
stream is opened (``_open_stream``) and accumulated (``_accumulator``), and how SDK errors read
(``_error``). Helpers: the API key lookup, SDK errors → ``ModelHTTPError`` / ``ModelError``, a raw
JSON body → ``ModelResponse``, and the end of a stream."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self, cast

import msgspec

from tether.errors import DecodeError, ModelError, ModelHTTPError, TetherError, UserError
from tether.messages import Message
from tether.models._base import (
    ModelResponse,
    ModelSettings,
    Profile,
    StreamEvent,
    ToolDefinition,
    with_limits,
)
from tether.models._reports import RequestReports
from tether.models.wire._common import ConversionReport, check_content
from tether.models.wire._memo import PerMessageCache

__all__ = [
    "Driver",
    "RequestReports",
    "api_key",
    "decode_body",
    "http_error",
    "request_failed",
    "sdk_error",
    "stream_result",
]


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
    def result(self, *, report: ConversionReport | None = None) -> ModelResponse: ...


class Accumulator(_Accumulator, Protocol):
    """What a wire module's ``StreamAccumulator`` offers a driver."""

    def feed(self, event: Any, /) -> list[StreamEvent]: ...


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


def sdk_error(exc: BaseException, status_error: type[BaseException], provider: str) -> ModelError:
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


def stream_result(
    accumulator: _Accumulator, provider: str, *, end: str, report: ConversionReport | None = None
) -> ModelResponse:
    """The response a finished stream assembled (what it cannot keep goes to ``report``). A stream
    cut before ``end`` (what marks a complete stream, e.g. ``"message_stop"``) or one that does not
    decode raises ``ModelError``."""
    if not accumulator.finished:
        raise ModelError(f"{provider} stream ended before {end}", stage="model")
    try:
        return accumulator.result(report=report)
    except DecodeError as exc:
        raise ModelError(f"{provider} streamed a malformed response: {exc}", stage="model") from exc


class Encoder(Protocol):
    """A wire module's ``encode_messages``: ``cache`` is the driver's own memo."""

    def __call__(
        self, messages: Sequence[Message], /, *, profile: Profile | None = ..., cache: Any = ...
    ) -> tuple[list[Any], ConversionReport]: ...


class _Memos:
    """The per-driver memos: content checks passed, and per-message wire encodings."""

    __slots__ = ("checked", "encodings")

    def __init__(self) -> None:
        self.checked: PerMessageCache[bool] = PerMessageCache()
        self.encodings: PerMessageCache[Any] = PerMessageCache()


class Driver(ABC):
    """What every driver shares: its profile, the report of its latest request, the one way a
    request's messages go onto the wire, the SDK client's lifecycle, and the skeleton of
    ``generate`` / ``stream``.

    Closing: ``await driver.aclose()`` (or ``async with driver: ...``) closes the SDK client the
    driver created and, through :meth:`_release`, whatever a subclass holds; a client passed in by
    the caller is never closed. The next request after ``aclose`` opens a new client.
    """

    _profile: Profile
    _reports: RequestReports
    _provider: str = ""
    """The provider label in errors (``"openai"``, ``"anthropic"``…)."""
    _stream_end: ClassVar[str] = "a finish reason"
    """What marks a complete stream, named in the error for a stream cut before it."""
    _failures: ClassVar[tuple[type[BaseException], ...]] = ()
    """The SDK exceptions :meth:`_error` translates (others propagate unchanged)."""
    _given_client: Any = None
    _own_client: Any = None
    _driver_memos: _Memos | None = None

    def __init__(
        self,
        *,
        profile: Profile,
        client: object = None,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        """``profile`` with the caller's token limits applied; ``client`` a ready SDK client the
        caller owns (the driver never closes it), or ``None`` to create one on first use."""
        self._profile = with_limits(
            profile, context_window=context_window, max_output_tokens=max_output_tokens
        )
        self._reports = RequestReports()
        self._given_client = client

    @property
    @abstractmethod
    def name(self) -> str:
        """``provider:model``."""

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

    @property
    def last_response_report(self) -> ConversionReport | None:
        """What the latest response this driver decoded held that tether messages cannot keep
        (server-side tool calls and results, citations and annotations, audio…): ``message`` is 0
        (the response's one message) and ``part`` the position of the item in the provider's list
        (content block, output item, candidate part; ``None`` for the whole response). ``None``
        before the first response and while a request is under way; a streamed response reports
        what the same non-streamed one would. Each kind of loss is also logged once per driver at
        WARNING on the ``tether.models`` logger."""
        return self._reports.last_response

    # -- the wire ---------------------------------------------------------------------------------
    def _memos(self) -> _Memos:
        memos = self._driver_memos
        if memos is None:  # created on first use: subclasses need not call Driver.__init__
            memos = self._driver_memos = _Memos()
        return memos

    def _wire(self, messages: Sequence[Message], encode: Encoder) -> list[Any]:
        """Check ``messages`` against the profile (``UnsupportedContent`` before any I/O), encode
        them with the driver's wire module (memoized per message in this driver), and record what
        the encoding could not carry."""
        memos = self._memos()
        check_content(messages, self._profile, passed=memos.checked)
        encoded, report = encode(messages, profile=self._profile, cache=memos.encodings)
        self._reports.record(self.name, messages, report)
        return encoded

    # -- the client's lifecycle -------------------------------------------------------------------
    def _sdk(self) -> Any:
        """The SDK client: the caller's, else the driver's own (created on first use)."""
        if self._given_client is not None:
            return self._given_client
        if self._own_client is None:
            self._own_client = self._new_client()
        return self._own_client

    def _new_client(self) -> Any:
        """Create the SDK client this driver owns (drivers that talk to an SDK override this)."""
        raise NotImplementedError(f"{type(self).__name__} does not create an SDK client")

    async def _close_client(self, client: Any) -> None:  # noqa: B027 - an optional hook
        """Close a client this driver created (drivers override this with their SDK's close)."""

    async def _release(self) -> None:  # noqa: B027 - an optional hook
        """Release what a subclass holds besides the SDK client (weights, threads, files).
        Called by :meth:`aclose`; the default holds nothing."""

    async def aclose(self) -> None:
        """Close what this driver created: its own SDK client (and the HTTP connections it holds)
        and, through :meth:`_release`, a subclass's own resources. A client passed in by the caller
        stays open. Idempotent; a later request opens a new client."""
        client, self._own_client = self._own_client, None
        try:
            await self._release()
        finally:
            if client is not None:
                await self._close_client(client)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- one request: the template ------------------------------------------------------------------
    def request(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> Any:
        """What the driver sends for this call (the SDK call's arguments), built without I/O.

        Raises ``UnsupportedContent`` for a part the profile cannot take."""
        raise NotImplementedError(f"{type(self).__name__} must implement request()")

    async def _send(self, request: Any, settings: ModelSettings | None) -> Any:
        """Send one non-streamed request; returns what :meth:`_decode_raw` reads."""
        raise NotImplementedError(f"{type(self).__name__} must implement _send() or override generate()")

    def _decode_raw(self, raw: Any, report: ConversionReport) -> ModelResponse:
        """The response :meth:`_send` received, decoded; what it cannot keep goes to ``report``."""
        raise NotImplementedError(f"{type(self).__name__} must implement _decode_raw() or override generate")

    def _open_stream(
        self, request: Any, settings: ModelSettings | None
    ) -> AbstractAsyncContextManager[AsyncIterator[Mapping[str, Any]]]:
        """Open one streamed request: the events as JSON objects; leaving the context closes the
        HTTP stream (also when the consumer stops early or is cancelled)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _open_stream() or override stream()")

    def _accumulator(self) -> Accumulator:
        """A fresh stream accumulator of the driver's wire module."""
        raise NotImplementedError(f"{type(self).__name__} must implement _accumulator() or override stream()")

    def _finish(self, response: ModelResponse, accumulator: Accumulator) -> ModelResponse:
        """The final streamed response (a driver may still reject it, e.g. a failed response)."""
        return response

    def _error(self, exc: BaseException) -> ModelError:
        """An SDK exception (one of ``_failures``) as ``ModelHTTPError`` / ``ModelError``."""
        return request_failed(exc, self._provider)

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """One non-streamed request, no tool execution."""
        request = self.request(messages, instructions=instructions, tools=tools, settings=settings)
        self._reports.record_response(self.name, None)
        try:
            raw = await self._send(request, settings)
        except TetherError:
            raise
        except self._failures as exc:
            raise self._error(exc) from exc
        report = ConversionReport()
        try:
            response = self._decode_raw(raw, report)
        except DecodeError as exc:
            raise ModelError(f"{self._provider} returned a malformed response: {exc}", stage="model") from exc
        self._reports.record_response(self.name, report)
        return response

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """One streamed request: deltas, then the same ``ModelResponse`` ``generate`` would give.

        ``UnsupportedContent`` is raised on first iteration, before any request. A stream that
        ends before it is complete raises ``ModelError``; cancelling the consumer closes the HTTP
        stream."""
        request = self.request(messages, instructions=instructions, tools=tools, settings=settings)
        self._reports.record_response(self.name, None)
        accumulator = self._accumulator()
        try:
            async with self._open_stream(request, settings) as events:
                async for event in events:
                    for delta in accumulator.feed(event):
                        yield delta
        except DecodeError as exc:
            raise ModelError(f"{self._provider} streamed a malformed event: {exc}", stage="model") from exc
        except TetherError:
            raise
        except self._failures as exc:
            raise self._error(exc) from exc
        report = ConversionReport()
        response = stream_result(accumulator, self._provider, end=self._stream_end, report=report)
        self._reports.record_response(self.name, report)
        yield self._finish(response, accumulator)
