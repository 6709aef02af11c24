"""Whether a run is traced, decided once per run at almost no cost.

``opentelemetry`` is never imported by tether itself: an application that configured a tracer or
meter provider has imported it already, and one that did not has nothing to export to. So a run
checks ``sys.modules`` first; only when the API is loaded does it ask for the global providers,
and a provider seen before answers from a cache (``None`` for the API's no-op and proxy
providers). When telemetry is off a run does no other telemetry work: no spans, no context
changes, no allocations per step.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from tether.errors import UserError

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from ._otel import Instruments

__all__ = [
    "CAPTURE_ENV",
    "DEFAULT_MAX_CONTENT_CHARS",
    "Telemetry",
    "configure",
    "default_telemetry",
]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventional opt-in for message content (``true`` to record it)."""
DEFAULT_MAX_CONTENT_CHARS = 16_384

_NOT_SEEN: Any = object()


class Telemetry:
    """How tether reports runs to OpenTelemetry.

    ``tracer_provider`` / ``meter_provider``: where spans and metrics go; ``None`` (the default)
    uses OpenTelemetry's global providers, as set by the application (``trace.set_tracer_provider``,
    ``opentelemetry-instrument``). While neither is configured tether does no telemetry work.

    ``capture_content``: record prompts, replies, tool arguments and results on the spans, in the
    GenAI conventions' structured form (``gen_ai.input.messages``, ``gen_ai.output.messages``,
    ``gen_ai.system_instructions``, ``gen_ai.tool.call.arguments``/``result``). Off by default;
    ``None`` reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true`` turns it on).
    ``max_content_chars`` bounds each recorded value (longer text is cut and says so; the oldest
    input messages are left out first). ``enabled=False`` turns tether's telemetry off entirely.

    Pass it as ``Agent(telemetry=...)`` for one agent, or ``configure(...)`` for every agent that
    has none.
    """

    __slots__ = (
        "_cached",
        "_mp",
        "_tp",
        "capture_content",
        "enabled",
        "max_content_chars",
        "meter_provider",
        "tracer_provider",
    )

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | None = None,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
        enabled: bool = True,
    ) -> None:
        if type(max_content_chars) is not int or max_content_chars < 64:
            raise UserError(f"max_content_chars must be an int >= 64, not {max_content_chars!r}")
        if capture_content is not None and type(capture_content) is not bool:
            raise UserError(f"capture_content must be True, False or None, not {capture_content!r}")
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.capture_content = capture_content
        self.max_content_chars = max_content_chars
        self.enabled = bool(enabled)
        self._tp: Any = _NOT_SEEN
        self._mp: Any = _NOT_SEEN
        self._cached: Instruments | None = None

    def __repr__(self) -> str:
        return (
            f"Telemetry(tracer_provider={self.tracer_provider!r}, meter_provider={self.meter_provider!r}, "
            f"capture_content={self.capture_content!r}, enabled={self.enabled!r})"
        )

    @property
    def captures_content(self) -> bool:
        """Whether message content is recorded (the argument, else the environment variable)."""
        if self.capture_content is not None:
            return self.capture_content
        return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"

    def instruments(self) -> Instruments | None:
        """The tracer and metric instruments to use now, or ``None`` when telemetry is off."""
        if not self.enabled:
            return None
        tp: Any = self.tracer_provider
        mp: Any = self.meter_provider
        if tp is None:
            tp = _global_provider(
                "opentelemetry.trace", "_TRACER_PROVIDER", "get_tracer_provider", _TRACER_ENV
            )
        if mp is None:
            mp = _global_provider(
                "opentelemetry.metrics._internal", "_METER_PROVIDER", "get_meter_provider", _METER_ENV
            )
        if tp is None and mp is None:
            return None
        if tp is self._tp and mp is self._mp:
            return self._cached
        from . import _otel  # the API is loaded (the application uses it): no import cost here

        self._cached = _otel.resolve(tp, mp, self.captures_content, self.max_content_chars)
        self._tp, self._mp = tp, mp
        return self._cached


_TRACER_ENV = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
_METER_ENV = "OTEL_PYTHON_METER_PROVIDER" in os.environ
_UNKNOWN: Any = object()


def _global_provider(module: str, variable: str, getter: str, from_env: bool) -> Any:
    """OpenTelemetry's global provider, or ``None`` when the API is not loaded or nothing was
    set (its proxy, a no-op): read from the API module's global first, which costs a dictionary
    lookup, since this runs at the start of every run."""
    api = sys.modules.get(module)
    if api is None:
        return None
    current = getattr(api, variable, _UNKNOWN)
    if current is None and not from_env:
        return None
    if current is not _UNKNOWN and current is not None:
        return current
    return getattr(api, getter)()  # the public way (loads a provider named in the environment)


_default = Telemetry()


def default_telemetry() -> Telemetry:
    """The settings of agents created without ``telemetry=``."""
    return _default


def configure(telemetry: Telemetry | None = None) -> Telemetry:
    """Set the telemetry of every agent that has no ``telemetry=`` of its own (``None``: the
    default, OpenTelemetry's global providers); returns the previous setting, to restore it."""
    global _default
    if telemetry is not None and not isinstance(telemetry, Telemetry):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"configure() takes a Telemetry, not {type(telemetry).__name__}")
    previous, _default = _default, telemetry if telemetry is not None else Telemetry()
    return previous
