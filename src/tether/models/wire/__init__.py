"""Provider wire mappings: tether messages to and from each provider's request/response JSON.

One place decides how a tether message looks on each wire. Drivers call these functions and
``tether.convert`` exposes them as ``from_<format>``/``to_<format>``. Pure; no SDK imports.
The readers of JSON-shaped input (``obj``, ``seq``, ``string``, ...; a ``DecodeError`` naming
the path) serve ``tether.convert`` too.
"""

from tether.models.wire._common import (
    ConversionReport,
    Loss,
    check_content,
    replays_reasoning,
    wire_arguments,
)
from tether.models.wire._json import (
    b64decode_either,
    fail,
    given,
    obj,
    opt_obj,
    opt_str,
    seq,
    string,
    token_count,
)

__all__ = [
    "ConversionReport",
    "Loss",
    "b64decode_either",
    "check_content",
    "fail",
    "given",
    "obj",
    "opt_obj",
    "opt_str",
    "replays_reasoning",
    "seq",
    "string",
    "token_count",
    "wire_arguments",
]
