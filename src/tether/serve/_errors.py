"""Every error a client sees: ``{"error": {"type": ..., "message": ...}}`` with a fitting status.

Deliberate errors (``ApiError`` and the ``TetherError`` tree) carry their message; anything else
is a bug: the client gets a fixed 500 body and the traceback goes to the server log only.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from tether.errors import (
    ConflictError,
    DecodeError,
    HistoryTooLarge,
    NotFound,
    StoreError,
    TetherError,
    UserError,
)

__all__ = ["ApiError", "check_part_bytes", "error_body", "error_response", "handle_exception", "handle_http"]

log = logging.getLogger("tether.serve")
_encoder = msgspec.json.Encoder()

_HTTP_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    429: "too_many_requests",
    500: "internal",
    503: "unavailable",
}


class ApiError(Exception):
    """An error answered as it is: HTTP ``status``, a short ``type`` and a message for people."""

    def __init__(
        self, status: int, message: str, *, type: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type or _HTTP_TYPES.get(status, "error")
        self.message = message
        self.headers = headers or {}


def check_part_bytes(text: str, limit: int, where: str) -> None:
    """413 naming ``where`` (a JSON path) when ``text`` is over ``limit`` UTF-8 bytes: a prompt,
    a deny reason or a client's tool result, each kept as one part (``max_part_bytes``). Text of
    at most ``limit // 4`` characters cannot be over, so only longer text is encoded."""
    if len(text) > limit // 4 and len(text.encode("utf-8", "surrogatepass")) > limit:
        raise ApiError(413, f"{where}: over the limit (max_part_bytes={limit})")


def error_body(type_: str, message: str, **extra: Any) -> bytes:
    return _encoder.encode({"error": {"type": type_, "message": message, **extra}})


def error_response(
    status: int, type_: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> Response:
    return Response(
        error_body(type_, message, **extra),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def as_api_error(exc: BaseException) -> ApiError:
    """The client-facing form of a deliberate error (``ApiError`` or ``TetherError``)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, NotFound):
        return ApiError(404, str(exc))
    if isinstance(exc, ConflictError):
        return ApiError(409, str(exc))
    if isinstance(exc, HistoryTooLarge):
        return ApiError(413, str(exc))
    if isinstance(exc, DecodeError):
        return ApiError(400, str(exc))
    if isinstance(exc, UserError):
        return ApiError(422, str(exc))
    if isinstance(exc, StoreError):
        log.error("store failure: %s", exc)
        return ApiError(503, "the conversation store failed; try again", type="unavailable")
    if isinstance(exc, TetherError):
        return ApiError(422, str(exc))
    raise TypeError(f"not a deliberate error: {type(exc).__name__}")


async def handle_exception(request: Request, exc: Exception) -> Response:
    """Starlette's handler for every exception a route raises."""
    if isinstance(exc, ApiError | TetherError):
        err = as_api_error(exc)
        extra: dict[str, Any] = {}
        if isinstance(exc, HistoryTooLarge):
            extra = {"limit": exc.limit, "where": exc.where}
        elif isinstance(exc, DecodeError) and exc.path is not None:
            extra = {"path": exc.path}
        return error_response(err.status, err.type, err.message, err.headers, **extra)
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, "internal", "internal server error")


async def handle_http(request: Request, exc: Exception) -> Response:
    """Starlette's own HTTP errors (unknown route, wrong method) as JSON."""
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status == 404:
        message = f"no route {request.url.path!r}"
    elif status == 405:
        message = f"method {request.method} is not allowed on {request.url.path!r}"
    else:
        message = str(exc.detail)
    return error_response(status, _HTTP_TYPES.get(status, "error"), message, dict(exc.headers or {}))
