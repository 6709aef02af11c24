"""Import an optional provider SDK, or raise ``MissingExtra`` naming the pip command.

Every driver module calls :func:`require` at import time for the SDK it wraps, so importing
``tether.models.anthropic`` without ``anthropic`` installed fails with
``pip install 'tether[anthropic]'`` instead of a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tether.errors import MissingExtra

__all__ = ["require"]


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` (e.g. ``"openai"``) or raise :class:`tether.MissingExtra`.

    ``extra`` is the tether extra that installs it (``"openai"`` → ``pip install 'tether[openai]'``);
    ``feature`` names what needs it in the message (``"the OpenAI Chat driver"``). Only a missing
    top-level package is translated: an SDK that is installed but broken re-raises unchanged.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.partition(".")[0]
        if exc.name is not None and exc.name.partition(".")[0] != top:
            raise  # the SDK is present but one of *its* dependencies is missing: not our extra
        raise MissingExtra(feature, extra, top) from exc
