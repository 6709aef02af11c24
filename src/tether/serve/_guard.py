"""Browser-facing checks made before a request reaches a route.

CORS is off, so no browser page of another origin may act on the API: a state-changing request
(any method but GET/HEAD/OPTIONS) carrying an ``Origin`` of another host is refused (a form
posted from another site carries one). With ``--no-auth`` nothing else protects the service, so
the ``Host`` must also be a loopback name: a page on a rebinding DNS name pointing at
127.0.0.1 is refused too.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request

from ._config import is_loopback
from ._errors import ApiError

__all__ = ["check_browser_boundary"]

_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


def _host_name(host: str) -> str:
    """``host`` without its port (``[::1]:8321`` → ``::1``)."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def check_browser_boundary(request: Request, *, auth: bool) -> None:
    host = request.headers.get("host", "")
    if not auth and not is_loopback(_host_name(host).lower()):
        raise ApiError(403, f"Host {host[:100]!r} is not a loopback name (the service runs with --no-auth)")
    origin = request.headers.get("origin")
    if origin is not None and request.method not in _SAFE:
        netloc = urlsplit(origin).netloc if origin != "null" else "null"
        if netloc.lower() != host.lower():
            raise ApiError(403, f"cross-origin request from {origin[:100]!r} refused (CORS is off)")
