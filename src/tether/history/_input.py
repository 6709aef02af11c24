"""The one argument check every history function makes before it looks at a message."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from tether.errors import UserError
from tether.messages import Message

__all__ = ["as_messages", "not_a_message"]

_ONLY_MESSAGES = frozenset({Message})


def not_a_message(value: object, index: int) -> UserError:
    """The error for ``history[index]`` holding something other than a ``Message``."""
    return UserError(f"history[{index}] is a {type(value).__name__}, not a Message")


def as_messages(history: Iterable[Message], function: str) -> list[Message] | tuple[Message, ...]:
    """``history`` as a list or tuple whose every item is a ``Message``.

    A list or tuple is returned as it is (not copied). ``None``, a single message, a string or
    anything not iterable is a ``UserError`` naming ``function``; an item that is not a
    ``Message`` is a ``UserError`` naming its index. The check runs at C speed (one ``set`` of
    item types), so it costs far less than the pass that follows it.
    """
    given = cast(object, history)  # callers are untyped too: check everything
    if type(given) is list or type(given) is tuple:
        msgs = cast("list[Message] | tuple[Message, ...]", given)
    else:
        if given is None or isinstance(given, str | bytes | bytearray | Message):
            raise UserError(f"{function} takes a sequence of messages, not {_describe(given)}")
        try:
            items = iter(cast("Iterable[Message]", given))
        except TypeError:
            raise UserError(f"{function} takes a sequence of messages, not {_describe(given)}") from None
        msgs = list(items)
    if not _ONLY_MESSAGES.issuperset(map(type, msgs)):
        for index, m in enumerate(msgs):
            if type(m) is not Message:
                raise not_a_message(m, index)
    return msgs


def _describe(value: object) -> str:
    if value is None:
        return "None"
    if isinstance(value, Message):
        return "a single Message (wrap it in a list)"
    return f"a {type(value).__name__}"
