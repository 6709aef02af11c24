"""``LocalModel``: a GGUF model run in-process by llama-cpp-python (``tether[local]``).

The model and its defaults in ``_model``, the generation loop in ``_engine``, the prompt format
and token bounds in ``_prompt``, the repetition detector in ``_repeat``. Importing this package
without the extra raises ``MissingExtra``.
"""

from tether.models.local._model import (
    DEFAULT_MAX_TOKENS,
    FUNCTION_CALLING,
    PROFILES,
    REPETITION,
    SAMPLING_DEFAULTS,
    LocalModel,
    RepetitionDetector,
    default_weights,
)

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "FUNCTION_CALLING",
    "PROFILES",
    "REPETITION",
    "SAMPLING_DEFAULTS",
    "LocalModel",
    "RepetitionDetector",
    "default_weights",
]
