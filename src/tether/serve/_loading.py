"""What ``--model`` and ``--tools`` name: a provider model, or a Python object by import path.

``py:package.module:name`` imports ``package.module`` and takes ``name``; when that is a
callable that is not already a model (or a tool list), it is called with no arguments (a
factory). Scripted models for tests and demos come in this way.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, cast

from tether.agent import Tool
from tether.agent.demo_tools import DEMO_TOOLS
from tether.errors import MissingExtra, UserError
from tether.models import Model, infer_model

__all__ = ["PY_PREFIX", "load_model", "load_object", "load_tools"]

PY_PREFIX = "py:"


def load_object(spec: str) -> Any:
    """The object named by ``py:package.module:name``."""
    path = spec.removeprefix(PY_PREFIX)
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"{spec!r} must look like py:package.module:name")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"{spec!r}: cannot import {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UserError(f"{spec!r}: {module_name!r} has no attribute {attr!r}") from None
    return obj


def _is_model(obj: object) -> bool:
    """A model instance (a model class has the attributes too, but is a factory to call)."""
    wanted = ("generate", "stream", "profile", "name")
    return not isinstance(obj, type) and all(hasattr(obj, n) for n in wanted)


def load_model(spec: str | None) -> Model:
    """``None``/``""``: the bundled local model; ``py:…``: a model or a factory of one; else
    ``provider:model`` as ``tether.models.infer_model`` reads it."""
    spec = (spec or "").strip() or "local"
    if not spec.startswith(PY_PREFIX):
        try:
            return infer_model(spec)
        except MissingExtra:
            raise
        except ImportError as exc:
            raise UserError(f"model {spec!r} cannot be loaded: {exc}") from exc
    obj = load_object(spec)
    if not _is_model(obj) and callable(obj):
        try:
            obj = obj()
        except Exception as exc:  # a factory that needs arguments, or fails: say which, no traceback
            raise UserError(f"{spec!r}: calling it with no arguments failed: {exc}") from exc
    if not _is_model(obj):
        raise UserError(f"{spec!r} is not a tether Model nor a factory returning one ({type(obj).__name__})")
    return cast(Model, obj)


def load_tools(spec: str | None) -> list[Any]:
    """``None``/``""``: no tools; ``demo``: the current time and a safe calculator; ``py:…``: a
    sequence of tools (functions or ``Tool``s) or a factory of one."""
    spec = (spec or "").strip()
    if not spec:
        return []
    if spec == "demo":
        return list(DEMO_TOOLS)
    if not spec.startswith(PY_PREFIX):
        raise UserError(f"--tools takes 'demo' or py:package.module:name, not {spec!r}")
    obj = load_object(spec)
    if callable(obj) and not isinstance(obj, Tool):
        obj = obj()
    if isinstance(obj, Tool) or not isinstance(obj, Sequence) or isinstance(obj, str | bytes):
        raise UserError(f"{spec!r} must be a sequence of tools or a factory returning one")
    return list(cast(Sequence[Any], obj))
