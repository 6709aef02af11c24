"""The uvicorn entry point of a worker process: ``tether.serve._main:app`` (a factory) reads its
``ServeConfig`` from the ``TETHER_SERVE_CONFIG`` environment variable."""

from __future__ import annotations

import os

from tether.errors import UserError

from ._app import ASGIApp, create_app
from ._config import CONFIG_ENV, ServeConfig

__all__ = ["app"]


def app() -> ASGIApp:
    raw = os.environ.get(CONFIG_ENV)
    if not raw:
        raise UserError(f"{CONFIG_ENV} is not set: start the service with tether serve")
    return create_app(ServeConfig.from_json(raw))
