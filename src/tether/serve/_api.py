"""The route table: each operation declared once with its method, path, body and response types.

The Starlette routes and the OpenAPI document (``_openapi.py``) are both built from this table, so
the document describes exactly what the code accepts. A handler receives a ``Call``: the request,
the authenticated caller, the decoded body and the service state.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ._errors import ApiError
from ._numbers import is_count, parse_count

if TYPE_CHECKING:
    from ._runs import Caller
    from ._state import ServeState

__all__ = [
    "Api",
    "Call",
    "Operation",
    "Query",
    "check_json_request",
    "json_response",
    "query_int",
    "read_json",
]

B = TypeVar("B")
_encoder = msgspec.json.Encoder()
_LONE_SURROGATE = re.compile(
    rb"(?<!\\)(?:\\\\)*(\\u[dD][89abAB][0-9a-fA-F]{2})(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
)
"""A high surrogate escape not followed by a low one (an even run of backslashes before it)."""


@dataclass(frozen=True, slots=True)
class Query:
    """A query parameter, for the document (handlers read it with ``query_int`` / ``query_str``)."""

    name: str
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Call(Generic[B]):
    request: Request
    caller: Caller
    body: B
    state: ServeState

    def path(self, name: str) -> str:
        return str(self.request.path_params[name])


Handler = Callable[[Call[Any]], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    path: str
    name: str
    summary: str
    handler: Handler
    body: Any = None
    body_required: bool = True
    response: Any = None
    status: int = 200
    query: tuple[Query, ...] = ()
    errors: tuple[int, ...] = ()
    auth: bool = True
    stream: bool = False
    headers: tuple[Query, ...] = ()
    description: str = ""
    tags: tuple[str, ...] = field(default=())
    stream_event: Any = None
    """For a stream: the JSON Schema of each event's ``data`` (default: the service's RunEvent)."""


class Api:
    """Collects operations; ``@api.route(...)`` declares one."""

    def __init__(self) -> None:
        self.operations: list[Operation] = []

    def include(self, other: Api) -> None:
        """Add ``other``'s operations (a routes module's own ``Api``), in their order."""
        self.operations.extend(other.operations)

    def route(
        self,
        method: str,
        path: str,
        *,
        summary: str,
        body: Any = None,
        body_required: bool = True,
        response: Any = None,
        status: int = 200,
        query: tuple[Query, ...] = (),
        errors: tuple[int, ...] = (),
        auth: bool = True,
        stream: bool = False,
        headers: tuple[Query, ...] = (),
        tags: tuple[str, ...] = (),
        stream_event: Any = None,
    ) -> Callable[[Handler], Handler]:
        def declare(fn: Handler) -> Handler:
            self.operations.append(
                Operation(
                    method,
                    path,
                    fn.__name__,
                    summary,
                    fn,
                    body,
                    body_required,
                    response,
                    status,
                    query,
                    errors,
                    auth,
                    stream,
                    headers,
                    (fn.__doc__ or "").strip(),
                    tags,
                    stream_event,
                )
            )
            return fn

        return declare


def json_response(value: Any, status: int = 200) -> Response:
    return Response(_encoder.encode(value), status_code=status, media_type="application/json")


def query_int(request: Request, name: str, default: int, *, low: int = 0, high: int = 1 << 62) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    value = parse_count(raw, f"query parameter {name!r}")
    if not low <= value <= high:
        raise ApiError(400, f"query parameter {name!r} must be between {low} and {high}, not {value}")
    return value


_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


def _is_json(media: str) -> bool:
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def check_json_request(request: Request, *, takes_body: bool) -> None:
    """A state-changing request (any method but GET/HEAD/OPTIONS) is JSON or has no body: a
    ``Content-Type`` other than JSON is 415 even with an empty body, and so is a body without
    one (the types an HTML form or a no-preflight ``fetch`` of another site can send are not
    JSON); a body on a route that takes none is 400. Checked from the headers, before any route
    runs, on every operation of the table."""
    if request.method in _SAFE:
        return
    types = request.headers.getlist("content-type")
    if len(types) > 1:
        raise ApiError(400, "several Content-Type headers: send at most one")
    declared = request.headers.get("content-length")
    empty = declared is not None and is_count(declared) and int(declared) == 0
    has_body = not empty and (declared is not None or "transfer-encoding" in request.headers)
    if types:
        media = types[0].split(";")[0].strip().lower()
        if not _is_json(media):
            raise ApiError(
                415, f"a request must be sent as Content-Type: application/json, not {media[:80]!r}"
            )
    elif has_body:
        raise ApiError(415, "a request body must be sent as Content-Type: application/json (none was given)")
    if has_body and not takes_body:
        raise ApiError(400, f"{request.method} {request.url.path[:200]} takes no request body")


async def read_json(request: Request, kind: Any, limit: int, *, required: bool = True) -> Any:
    """The body decoded as ``kind``; 413 over ``limit`` bytes, 400 naming the JSON path."""
    declared = request.headers.get("content-length")
    if declared is not None and is_count(declared) and int(declared) > limit:
        raise ApiError(413, f"request body of {declared} bytes is over the limit (max_body_bytes={limit})")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"request body is over the limit (max_body_bytes={limit})")
            chunks.append(chunk)
    except ClientDisconnect:  # the client went away mid-body: nothing to answer, nothing to log
        raise ApiError(400, "the client closed the connection before sending the whole body") from None
    data = b"".join(chunks)
    if not data.strip():
        if required:
            raise ApiError(400, "the request needs a JSON body at $")
        data = b"{}"
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        text = str(exc)
        path = text.rsplit(" - at `", 1)[1].rstrip("`") if " - at `" in text else "$"
        message = text.rsplit(" - at `", 1)[0]
        raise ApiError(400, f"invalid request body at {path}: {message}") from None
    except msgspec.DecodeError as exc:
        lone = _LONE_SURROGATE.search(data)
        if lone is not None:  # msgspec calls this "truncated": say what it is
            raise ApiError(
                400,
                f"request body is not valid JSON at $: a lone UTF-16 surrogate escape "
                f"{lone.group(1).decode()!r} at byte {lone.start(1)} (text must be valid Unicode)",
            ) from None
        raise ApiError(400, f"request body is not valid JSON at $: {exc}") from None
    except RecursionError:
        raise ApiError(400, "request body is nested too deeply at $") from None
