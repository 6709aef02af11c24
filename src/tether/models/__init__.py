"""The Model protocol, drivers, and the offline models shipped for tests.

Drivers import their provider SDK only when their module is imported; a missing SDK raises
``MissingExtra`` naming the pip command.
"""

from tether.models._base import (
    Model,
    ModelResponse,
    ModelSettings,
    Profile,
    ReasoningDelta,
    ReasoningReplay,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
    aclose_model,
    with_limits,
)
from tether.models._registry import PROVIDERS, infer_model

__all__ = [
    "PROVIDERS",
    "Model",
    "ModelResponse",
    "ModelSettings",
    "Profile",
    "ReasoningDelta",
    "ReasoningReplay",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "ToolDefinition",
    "aclose_model",
    "infer_model",
    "with_limits",
]
