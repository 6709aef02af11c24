"""Rules every wire mapping shares: the conversion report, turn merging, argument text, content
checks and the reasoning replay policy. Pure functions, no SDK imports; the per-message memos a
driver owns are in :mod:`tether.models.wire._memo`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from tether.errors import UnsupportedContent
from tether.messages import Document, Image, Message, Reasoning, ToolCall, ToolResult
from tether.models._base import Profile
from tether.models.wire._memo import MessageTable, PerMessageCache

__all__ = [
    "SYNTHESIZED_RESULT",
    "TRUNCATED_ARGUMENTS",
    "ConversionReport",
    "Loss",
    "LossRecord",
    "MessageTable",
    "PerMessageCache",
    "best_profile",
    "check_content",
    "fallback_id",
    "in_family",
    "merged_turns",
    "reasoning_refused",
    "replays_from",
    "replays_reasoning",
    "wire_arguments",
]

TRUNCATED_ARGUMENTS = "not a JSON object: sent as truncated_args"
"""The reason recorded when a call's arguments go out wrapped by :func:`wire_arguments`."""
SYNTHESIZED_RESULT = "synthesized results are sent as ordinary results"
"""The reason recorded for a ``ToolResult.synthesized`` flag no wire format carries."""

LossKind = Literal["dropped", "approximated"]
LossRecord = tuple[int | None, LossKind, str, str]
"""A loss recorded while encoding one message: ``(part, kind, what, reason)``. The message index
is added when the record is replayed into a report (:meth:`ConversionReport.extend`), so a
message's encoding, losses included, can be cached and reused at any position."""


@dataclass(frozen=True, slots=True)
class Loss:
    """One thing a conversion could not carry exactly. ``part`` is ``None`` for a whole message."""

    message: int
    part: int | None
    kind: LossKind
    what: str
    reason: str


@dataclass(slots=True)
class ConversionReport:
    """What a conversion dropped or approximated, per message and part index. Never silent."""

    losses: list[Loss] = field(default_factory=lambda: [])

    @property
    def lossless(self) -> bool:
        return not self.losses

    def drop(self, message: int, part: int | None, what: str, reason: str) -> None:
        self.losses.append(Loss(message, part, "dropped", what, reason))

    def approximate(self, message: int, part: int | None, what: str, reason: str) -> None:
        self.losses.append(Loss(message, part, "approximated", what, reason))

    def extend(self, message: int, records: Iterable[LossRecord]) -> None:
        """Add the losses recorded while encoding the message now at index ``message``."""
        for part, kind, what, reason in records:
            self.losses.append(Loss(message, part, kind, what, reason))

    def to_json(self) -> bytes:
        return msgspec.json.encode({"losses": self.losses})


def merged_turns(
    messages: Sequence[Message],
    encoded: Sequence[tuple[str, Sequence[Any], Sequence[LossRecord]]],
    *,
    key: str,
    api: str,
) -> tuple[list[dict[str, Any]], ConversionReport]:
    """Turns for APIs that alternate user and model turns (Anthropic ``content``, Gemini ``parts``).

    ``encoded[i]`` is ``(role, items, losses)`` for ``messages[i]``. Role ``system`` is left out
    (the encoder records that loss); a message with no items is dropped and reported (``api``
    rejects empty turns). Tool messages and a user message right after them are merged into one
    ``user`` turn, results first, as both APIs require. When a left-out message stood between two
    turns of the same role (a model turn with nothing to send between two user turns), the later
    one joins the earlier one, so roles still alternate; that is reported too. The ``items``
    lists are copied; the items themselves are shared.
    """
    out: list[dict[str, Any]] = []
    report = ConversionReport()
    merge_into: dict[str, Any] | None = None  # the open user turn that started with tool results
    gap: str | None = None  # the role of a message left out since the last turn
    for index, (message, (role, items, losses)) in enumerate(zip(messages, encoded, strict=True)):
        if losses:
            report.extend(index, losses)
        if role == "system":
            gap = gap or message.role
            continue
        if not items:
            report.drop(index, None, f"{message.role} message", f"empty: {api} rejects empty turns")
            gap = gap or message.role
            continue
        if gap is not None and out and out[-1]["role"] == role:
            # Two turns of one role in a row only because a message between them was left out.
            report.approximate(
                index,
                None,
                f"{message.role} message",
                f"joined the previous {role} turn: the {gap} message between them was left out "
                f"and {api} alternates roles",
            )
            previous = out[-1]
            previous[key] = [*previous[key], *items]
            merge_into = previous if message.role == "tool" else None
            gap = None
            continue
        gap = None
        if message.role == "tool":
            if merge_into is not None:
                merge_into[key] = [*merge_into[key], *items]
            else:
                merge_into = {"role": "user", key: list(items)}
                out.append(merge_into)
            continue
        if role == "user" and merge_into is not None:
            merge_into[key] = [*merge_into[key], *items]
            merge_into = None
            continue
        merge_into = None
        out.append({"role": role, key: list(items)})
    return out, report


def best_profile(profiles: Iterable[Profile], model: str, default: Profile) -> Profile:
    """The profile whose ``family`` is the longest prefix of ``model`` (the first of equally long
    ones), or ``default`` when none matches."""
    best: Profile | None = None
    for profile in profiles:
        if model.startswith(profile.family) and (best is None or len(profile.family) > len(best.family)):
            best = profile
    return default if best is None else best


def fallback_id(*fields: object, prefix: str = "call_") -> str:
    """A deterministic id for a tool call that came without one: ``prefix`` plus 24 hex digits of
    the SHA-256 of ``fields`` (e.g. response id or position, name, arguments)."""
    digest = hashlib.sha256("\x1f".join(str(f) for f in fields).encode()).hexdigest()
    return f"{prefix}{digest[:24]}"


def wire_arguments(call: ToolCall) -> str:
    """The argument text sent for a call: verbatim when it is a JSON object, otherwise the
    deterministic wrapper ``{"truncated_args": "<verbatim text>"}``."""
    if call.truncated:
        return msgspec.json.encode({"truncated_args": call.arguments}).decode()
    return call.arguments


def check_content(
    messages: Sequence[Message], profile: Profile, *, passed: PerMessageCache[bool] | None = None
) -> None:
    """Raise ``UnsupportedContent`` (message and part index) for the first part the profile
    cannot take. Called by drivers before any network call. ``passed`` (a driver's own memo)
    remembers the messages that passed for a profile (messages are immutable), so the steps of one
    run only check new messages; without it every message is checked."""
    if passed is None:
        for mi, message in enumerate(messages):
            _check_message(message, profile, mi)
        return
    table = passed.table(profile)
    for mi, message in table.missing(messages):
        _check_message(message, profile, mi)
        table.put(message, True)


def _check_message(message: Message, profile: Profile, mi: int) -> None:
    for pi, part in enumerate(message.parts):
        _check_part(part, profile, mi, pi, in_result=False)
        if type(part) is ToolResult:
            for item in part.content:
                if type(item) is not Image and type(item) is not Document:
                    continue
                if not profile.tool_result_media:
                    raise UnsupportedContent(
                        f"{profile.provider} cannot take {type(item).__name__.lower()} "
                        f"content in tool results",
                        message_index=mi,
                        part_index=pi,
                    )
                _check_part(item, profile, mi, pi, in_result=True)


def _check_part(part: object, profile: Profile, mi: int, pi: int, *, in_result: bool) -> None:
    where = " in a tool result" if in_result else ""
    if type(part) is Image:
        if not profile.images:
            raise UnsupportedContent(
                f"{profile.provider} model cannot take images{where}", message_index=mi, part_index=pi
            )
        if part.url is not None and not profile.image_urls:
            raise UnsupportedContent(
                f"{profile.provider} model cannot take image URLs{where}; pass inline data",
                message_index=mi,
                part_index=pi,
            )
    elif type(part) is Document:
        if not profile.documents:
            raise UnsupportedContent(
                f"{profile.provider} model cannot take documents ({part.media_type or 'by url'}){where}",
                message_index=mi,
                part_index=pi,
            )
        if part.data is not None and profile.document_types and not _type_accepted(part.media_type, profile):
            raise UnsupportedContent(
                f"{profile.provider} model takes documents of type {', '.join(profile.document_types)}, "
                f"not {part.media_type}{where}",
                message_index=mi,
                part_index=pi,
            )
        if part.url is not None and not profile.document_urls:
            raise UnsupportedContent(
                f"{profile.provider} model cannot take document URLs{where}; pass inline data",
                message_index=mi,
                part_index=pi,
            )


def in_family(model: str | None, family: str) -> bool:
    """Whether the model named ``model`` belongs to ``family``: its name starts with the family
    (after a ``models/`` path or a cloud deployment prefix such as ``eu.anthropic.``). An unknown
    model (``None``: an imported transcript) counts as in the family; the provider already matched
    and the provider still verifies the signature."""
    if model is None:
        return True
    if not family:
        return False
    name = model.rsplit("/", 1)[-1]
    return name.startswith(family) or f".{family}" in name


def _type_accepted(media_type: str | None, profile: Profile) -> bool:
    kind = media_type or ""
    return any(
        kind == accepted or (accepted.endswith("/*") and kind.startswith(accepted[:-1]))
        for accepted in profile.document_types
    )


def replays_reasoning(part: Reasoning, message: Message, profile: Profile) -> bool:
    """Whether ``part`` (in ``message``) may be sent back to a model with ``profile``.

    ``same-provider``: the reasoning's provider (or the message's) equals the target's.
    ``same-family``: additionally the message's model is in the target's family
    (:func:`in_family`: ``claude-sonnet-4-5-20250929`` is in ``claude-sonnet-4``).
    ``never``: no reasoning is replayed. Reasoning that is not replayed is dropped and reported
    by the caller (policy in docs/adr/0005-wire-mapping.md).
    """
    return replays_from(part.provider or message.provider, message, profile)


def replays_from(owner: str | None, message: Message, profile: Profile) -> bool:
    """The policy of :func:`replays_reasoning` for any signed content: whether a signature made by
    provider ``owner`` (``None``: unknown) in ``message`` may be sent to a model with ``profile``
    (Gemini's signatures on text and tool calls, whose owner is the message's provider)."""
    if profile.reasoning_replay == "never" or owner != profile.provider:
        return False
    if profile.reasoning_replay == "same-family":
        return in_family(message.model, profile.family)
    return True


def reasoning_refused(part: Reasoning, profile: Profile) -> str:
    """The loss reason for reasoning :func:`replays_reasoning` keeps from ``profile``."""
    return f"{profile.provider}/{profile.family or '*'} does not take reasoning from {part.provider}"
