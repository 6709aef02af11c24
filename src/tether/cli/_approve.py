"""Asking the person at the terminal whether a paused tool call may run (``tether chat``)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from rich.markup import escape
from rich.prompt import Confirm

from tether.agent import Approve, Deferred, DeferredResults, Deny
from tether.cli._common import out_console
from tether.cli._render import preview

__all__ = ["ask_in_terminal", "decide"]


def ask_in_terminal(question: str) -> bool:
    """Yes or no from the terminal; without one to ask, no (the call is denied, and said so)."""
    if not sys.stdin.isatty():
        out_console().print(f"{question} [dim](no terminal to ask: denied)[/]")
        return False
    return Confirm.ask(question, default=False, console=out_console())


def decide(pending: Deferred, approve: Callable[[str], bool]) -> DeferredResults:
    """One decision per call waiting for approval, each asked with its name and arguments."""
    decisions: dict[str, Approve | Deny] = {}
    for call in pending.approvals:
        asked = f"run [bold]{escape(call.call.name)}[/]({escape(preview(call.call.arguments, 200))})?"
        decisions[call.call.id or ""] = (
            Approve(call.token) if approve(asked) else Deny("the user did not approve it", call.token)
        )
    return DeferredResults(approvals=decisions)
