"""The compaction tether's own front ends use (``tether chat``, ``tether serve``): at 80% of
the model's context window, aiming at 50%, with the bundled local model's window known."""

from __future__ import annotations

from tether.agent.compaction._config import Compaction
from tether.errors import UserError
from tether.models import Model

__all__ = ["LOCAL_MAX_TOKENS", "LOCAL_WINDOW", "compaction_window", "default_compaction", "model_window"]

LOCAL_WINDOW = 4096
"""The bundled local model's context window in tokens (``LocalModel(n_ctx=4096)``)."""
LOCAL_MAX_TOKENS = 512
"""The most tokens a local reply takes by default: kept free for it."""


def model_window(model: Model) -> int | None:
    """The model's context window in tokens: what its provider publishes, or for a local GGUF
    model the context it is loaded with (:data:`LOCAL_WINDOW`); ``None`` when not known."""
    profile = model.profile
    return profile.context_window or (LOCAL_WINDOW if profile.provider == "local" else None)


def compaction_window(config: Compaction, model: Model) -> int:
    """The window ``config`` compacts against on ``model``: ``Compaction(window=...)``, else the
    model's (:func:`model_window`). Neither: ``UserError`` naming the fix, at ``Agent(...)`` and
    again at run start (``agent.model`` may have been replaced since), never a run that silently
    never compacts (ADR 0021)."""
    if config.window is not None:
        return config.window
    window = model_window(model)
    if window is None:
        raise UserError(
            f"compaction needs the context window of model {model.name!r}, and its profile does "
            "not give one: pass Compaction(window=<tokens>) (the model's context window), or "
            "leave compaction out"
        )
    return window


def default_compaction(model: Model, *, recall: bool) -> Compaction | None:
    """The compaction of ``tether chat`` and ``tether serve``: at 80% of the model's context
    window (the local model's is 4096 tokens), aiming at 50%; the agent's model writes the
    summaries. ``None`` when the window is not known: compaction is then left out on purpose
    (``Compaction`` without a window is refused, see :func:`compaction_window`)."""
    local = model.profile.provider == "local"
    window = model_window(model)
    if window is None:
        return None
    if local:  # a small window: a short summary, and room for the reply
        return Compaction(
            window=window, reserve=LOCAL_MAX_TOKENS, summary_tokens=300, keep_last=6, recall=recall
        )
    # the summary's budget scales with the window (2,000 tokens from a 16k window up)
    return Compaction(window=window, summary_tokens=max(min(2_000, window // 8), 64), recall=recall)
