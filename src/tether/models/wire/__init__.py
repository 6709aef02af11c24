"""Provider wire mappings: tether messages to and from each provider's request/response JSON.

One place decides how a tether message looks on each wire. Drivers call these functions and
``tether.convert`` exposes them as ``from_<format>``/``to_<format>``. Pure; no SDK imports.
"""

from tether.models.wire._common import (
    ConversionReport,
    Loss,
    check_content,
    replays_reasoning,
    wire_arguments,
)

__all__ = ["ConversionReport", "Loss", "check_content", "replays_reasoning", "wire_arguments"]
