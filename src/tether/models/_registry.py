"""``"provider:model"`` strings to driver instances, importing a driver only when asked."""

from __future__ import annotations

import importlib
from typing import Any

from tether.errors import UserError
from tether.models._base import Model

__all__ = ["PROVIDERS", "infer_model"]

# prefix -> (module, factory); the factory takes the model name and keyword arguments.
PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("tether.models.openai_chat", "OpenAIChatModel"),
    "openai-responses": ("tether.models.openai_responses", "OpenAIResponsesModel"),
    "anthropic": ("tether.models.anthropic", "AnthropicModel"),
    "google": ("tether.models.gemini", "GeminiModel"),
    "local": ("tether.models.local", "LocalModel"),
    "test": ("tether.models.testing", "TestModel"),
}


def infer_model(spec: str | Model, **kwargs: Any) -> Model:
    """``"openai:gpt-4o"``, ``"anthropic:claude-…"``, ``"google:gemini-…"``,
    ``"openai-responses:…"``, ``"local"`` (or ``"local:/path/to.gguf"``) → a driver."""
    if not isinstance(spec, str):
        return spec
    provider, _, name = spec.partition(":")
    if provider not in PROVIDERS:
        known = ", ".join(sorted(PROVIDERS))
        raise UserError(f"unknown model {spec!r}: provider {provider!r} is not one of {known}")
    if not name.strip() and provider not in ("local", "test"):  # "openai" and "openai:" alike
        raise UserError(f"model {spec!r} needs a model name: '{provider}:<model>'")
    module_name, factory = PROVIDERS[provider]
    module = importlib.import_module(module_name)
    cls = getattr(module, factory)
    model: Model = cls(name, **kwargs) if name else cls(**kwargs)
    return model
