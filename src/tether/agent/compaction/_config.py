"""``Compaction``: how an agent compacts long conversations, and the summarizer's default prompt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias, cast

from tether.errors import UserError
from tether.history import TokenCounter, Trigger
from tether.models import Model

__all__ = ["DEFAULT_SUMMARY_PROMPT", "SUMMARY_REQUEST", "Compaction", "CompactionStrategy"]

CompactionStrategy: TypeAlias = Literal["elide", "summarize"]
_STRATEGIES = ("elide", "summarize")

DEFAULT_SUMMARY_PROMPT = """\
You are compacting the history of a long conversation between a user and an AI agent that uses \
tools. Your summary replaces the messages you are shown: the agent will continue the work with \
only your summary and the most recent messages, so whatever you leave out is lost to it.

You receive the previous summary, if there is one, inside <previous-summary>, and the messages \
that came after it inside <messages>; each message is labelled with its position, like [42]. \
Write one updated summary that replaces both. Keep everything from the previous summary that \
still matters and add what the new messages changed; never drop a fact only because it is old, \
and correct what the new messages show to be outdated.

Keep, under these headings:
Task: what the user asked for, with every constraint, requirement and preference they stated, \
in their words where the wording matters.
Decisions: what was decided or agreed and why; what was tried and rejected, and why.
Identifiers: copy exactly, character for character, every file path, URL, id, name, number, \
version, command, date, amount and error message that may be needed again. Never paraphrase, \
shorten or round them.
Evidence: which tools were called on what, what they returned or how they failed (with the \
exact error text), and what was changed in the world (files written, records created, messages \
sent).
State: what is done, what is in progress, open questions, and the next step.

Cite the position of important evidence, like (see [57]), so the original can be looked up. Be \
dense: short bullet lists, no pleasantries, no remarks about summarizing. Write only the summary.\
"""
"""The default instructions of the summarizer: the task and its constraints, decisions and why,
exact identifiers, tool evidence with its outcome, open questions and the next step."""

SUMMARY_REQUEST = "Write the updated summary now."
"""The line that closes every summarizer request, after the previous summary and the messages."""


@dataclass(frozen=True, slots=True)
class Compaction:
    """How an agent compacts long conversations (``Agent(..., compaction=Compaction())``).

    - ``strategies``: tried in order until the view fits ``target``: ``"elide"`` (old tool output
      and unsigned reasoning become placeholders, outside the last ``keep_last`` messages) and
      ``"summarize"`` (a model summarizes everything before a pair-safe boundary). Budgeting (drop
      the oldest messages) is always the last resort, when the view is still over ``threshold``.
    - ``threshold`` / ``target``: fractions of the usable window (``window`` minus ``reserve``):
      compaction starts when a request's messages would pass ``threshold`` and aims at ``target``.
    - ``window``: the model's context window in tokens; overrides the model profile's.
    - ``reserve``: tokens kept free for the answer (e.g. the request's ``max_tokens``).
    - ``summarizer``: the model that writes summaries (a ``Model`` or ``"provider:model"``);
      ``None`` uses the agent's model. ``prompt``: its instructions (replaceable).
    - ``timeout``: seconds for one compaction's summarizer calls together.
    - ``soft_threshold``: start summarizing in the background when a request passes this fraction,
      while the run continues; the summary is adopted at a later request.
    - ``summary_tokens``: the summary's ``max_tokens`` (also reserved for it when choosing the
      boundary); ``chunk_tokens``: the most transcript tokens per summarizer call (default: the
      threshold's tokens minus twice ``summary_tokens``, so a request with the previous summary
      and the answer fits the window); ``max_calls``: the most summarizer calls per compaction
      (older messages beyond them are left to ``recall`` and the summary says so).
    - ``max_part_chars``: each text in the summarizer's transcript keeps its head and tail up
      to this many characters.
    - ``counter``: the token counter (default: the approximate one).
    - ``recall``: placeholders and the summary mention the recall tool (offer it to the model).
    """

    strategies: tuple[CompactionStrategy, ...] = ("elide", "summarize")
    threshold: float = 0.8
    target: float = 0.5
    window: int | None = None
    reserve: int = 0
    summarizer: Model | str | None = None
    prompt: str = DEFAULT_SUMMARY_PROMPT
    timeout: float = 120.0
    soft_threshold: float | None = None
    keep_last: int = 8
    min_elide_bytes: int = 256
    summary_tokens: int = 2_000
    chunk_tokens: int | None = None
    max_calls: int = 4
    max_part_chars: int = 2_000
    counter: TokenCounter | None = None
    recall: bool = True

    def __post_init__(self) -> None:
        given = cast(object, self.strategies)
        if isinstance(given, str) or not isinstance(given, tuple | list):
            raise UserError("Compaction.strategies must be a tuple of 'elide' and/or 'summarize'")
        strategies = tuple(cast("tuple[object, ...]", given))
        for s in strategies:
            if s not in _STRATEGIES:
                raise UserError(f"unknown compaction strategy {s!r}; expected 'elide' or 'summarize'")
        object.__setattr__(self, "strategies", strategies)
        summarizer = cast(object, self.summarizer)
        if summarizer is not None and not isinstance(summarizer, str | Model):
            raise UserError(f"Compaction.summarizer must be a Model, a model name or None: {summarizer!r}")
        Trigger(self.window or self.reserve + 1, self.threshold, self.target, self.reserve)  # checks them
        if self.soft_threshold is not None and not self.target < self.soft_threshold < self.threshold:
            raise UserError(
                f"soft_threshold ({self.soft_threshold}) must lie between target ({self.target}) "
                f"and threshold ({self.threshold})"
            )
        for name in ("keep_last", "min_elide_bytes", "max_part_chars"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise UserError(f"Compaction.{name} must be an int >= 0, not {value!r}")
        for name in ("summary_tokens", "max_calls"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise UserError(f"Compaction.{name} must be an int >= 1, not {value!r}")
        if self.chunk_tokens is not None and (type(self.chunk_tokens) is not int or self.chunk_tokens < 1):
            raise UserError(f"Compaction.chunk_tokens must be an int >= 1 or None, not {self.chunk_tokens!r}")
        timeout = cast(object, self.timeout)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0:
            raise UserError(f"Compaction.timeout must be a positive number of seconds, not {self.timeout!r}")
        prompt = cast(object, self.prompt)
        if not isinstance(prompt, str) or not prompt.strip():
            raise UserError("Compaction.prompt must be a non-empty string")
        if self.counter is not None and not callable(self.counter):
            raise UserError("Compaction.counter must be a token counter: a callable message -> int")
