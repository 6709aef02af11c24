"""Rules every wire mapping shares: the conversion report, argument text, content checks and
the reasoning replay policy. Pure functions, no SDK imports."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from tether.errors import UnsupportedContent
from tether.messages import Document, Image, Message, Reasoning, ToolCall, ToolResult
from tether.models._base import Profile

__all__ = [
    "ConversionReport",
    "Loss",
    "check_content",
    "replays_reasoning",
    "wire_arguments",
]

LossKind = Literal["dropped", "approximated"]


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

    def to_json(self) -> bytes:
        return msgspec.json.encode({"losses": self.losses})


def wire_arguments(call: ToolCall) -> str:
    """The argument text sent for a call: verbatim when it is a JSON object, otherwise the
    deterministic wrapper ``{"truncated_args": "<verbatim text>"}``."""
    if call.truncated:
        return msgspec.json.encode({"truncated_args": call.arguments}).decode()
    return call.arguments


_checked: weakref.WeakKeyDictionary[Message, set[Profile]] = weakref.WeakKeyDictionary()


def check_content(messages: Sequence[Message], profile: Profile) -> None:
    """Raise ``UnsupportedContent`` (message and part index) for the first part the profile
    cannot take. Called by drivers before any network call. A message that passed for a profile
    is remembered (messages are immutable), so the steps of one run only check new messages."""
    for mi, message in enumerate(messages):
        seen = _checked.get(message)
        if seen is not None and profile in seen:
            continue
        _check_message(message, profile, mi)
        if seen is None:
            _checked[message] = {profile}
        else:
            seen.add(profile)


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
        if part.url is not None and not profile.document_urls:
            raise UnsupportedContent(
                f"{profile.provider} model cannot take document URLs{where}; pass inline data",
                message_index=mi,
                part_index=pi,
            )


def replays_reasoning(part: Reasoning, message: Message, profile: Profile) -> bool:
    """Whether ``part`` (in ``message``) may be sent back to a model with ``profile``.

    ``same-provider``: the reasoning's provider (or the message's) equals the target's.
    ``same-family``: additionally the message's model belongs to the target's family.
    ``never``: no reasoning is replayed. Reasoning that is not replayed is dropped and reported
    by the caller (policy in docs/adr/0005-wire-mapping.md).
    """
    if profile.reasoning_replay == "never":
        return False
    source = part.provider or message.provider
    if source != profile.provider:
        return False
    if profile.reasoning_replay == "same-family":
        return bool(profile.family) and (message.model or "").startswith(profile.family)
    return True
