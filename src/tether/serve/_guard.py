"""Browser-facing checks made before a request reaches a route.

CORS is off, so no browser page of another origin may act on the API: a state-changing request
(any method but GET/HEAD/OPTIONS) carrying an ``Origin`` of another host is refused (a form
posted from another site carries one). With ``--no-auth`` nothing else protects the service, so
the ``Host`` must also be a loopback name: a page on a rebinding DNS name pointing at
127.0.0.1 is refused too.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from starlette.requests import Request

from ._config import is_loopback
from ._errors import ApiError

__all__ = ["check_browser_boundary"]

_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\[\]:@/\s]+)(:[0-9]{1,5})?")


def _host_name(host: str) -> str:
    """``host`` without its port (``[::1]:8321`` → ``::1``); ``""`` unless it is a well-formed
    ``host[:port]`` (``localhost:80@evil.example`` is not)."""
    match = _HOST.fullmatch(host)
    return match.group(1).strip("[]") if match else ""


def check_browser_boundary(request: Request, *, auth: bool) -> None:
    hosts = request.headers.getlist("host")
    if len(hosts) > 1:
        raise ApiError(400, "several Host headers: send exactly one")
    host = hosts[0] if hosts else ""
    if not auth and not is_loopback(_host_name(host).lower()):
        raise ApiError(403, f"Host {host[:100]!r} is not a loopback name (the service runs with --no-auth)")
    origin = request.headers.get("origin")
    if origin is not None and request.method not in _SAFE:
        netloc = urlsplit(origin).netloc if origin != "null" else "null"
        if netloc.lower() != host.lower():
            raise ApiError(403, f"cross-origin request from {origin[:100]!r} refused (CORS is off)")
