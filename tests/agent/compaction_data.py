"""Data for compaction tests and bench/compaction.py: a long synthetic task conversation with
facts planted at known positions, a deterministic summarizer, and a driver that feeds a
conversation to a ``Compactor`` the way the run loop does (one ``prepare`` per model request)."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tether import Message, Text, ToolCall, ToolResult, assistant, tool, user
from tether.agent import Compactor, Prepared
from tether.history import render_message
from tether.models.testing import FunctionInfo, FunctionModel

__all__ = ["Fact", "Summaries", "feed", "retention", "task_conversation"]

_FILLER = (
    "the service reads its settings at start up and retries the connection with a backoff; "
    "requests are logged with their latency and the worker pool size is printed every minute; "
)


@dataclass(frozen=True, slots=True)
class Fact:
    """A planted fact: ``text`` appears verbatim in message ``position`` (said by ``where``)."""

    position: int
    text: str
    kind: str
    where: str


def _fact(salt: int, k: int) -> tuple[str, str, str]:
    """(kind, exact text, sentence carrying it): the k-th fact of a conversation."""
    kind = ("ticket", "path", "number", "decision", "error", "url")[k % 6]
    n = 1000 + (k * 7919 + salt) % 9000  # distinct within a conversation (7919 is prime)
    if kind == "ticket":
        text = f"DEP-{n}"
        return kind, text, f"The deploy ticket for this part is {text}."
    if kind == "path":
        text = f"/srv/app/module_{n}/settings.toml"
        return kind, text, f"The settings live in {text}."
    if kind == "number":
        text = f"{n} ms"
        return kind, text, f"Constraint: the p95 latency must stay under {text}."
    if kind == "decision":
        text = f"DEC-{n}"
        return kind, text, f"Decision {text}: use advisory locks, because row locks deadlocked in staging."
    if kind == "error":
        text = f"E-{n}: connection refused by db-{n % 7}.internal:5433"
        return kind, text, f"The run failed with {text}"
    text = f"https://status.example.com/incidents/{n}"
    return kind, text, f"See {text} for the outage report."


def task_conversation(
    n: int, *, seed: int = 0, every: int = 7, result_bytes: int = 1_500
) -> tuple[list[Message], list[Fact]]:
    """About ``n`` messages of a tool-using task (user asks; the assistant reads a file; the tool
    returns ``result_bytes`` of output; the assistant answers), with one fact planted in every
    ``every``-th message in turn in user text, tool output and assistant text."""
    salt = random.Random(seed).randrange(9000)
    out: list[Message] = []
    facts: list[Fact] = []
    k = 0

    def plant(where: str) -> str:
        nonlocal k
        if (len(out) + 1) % every:
            return ""
        kind, text, sentence = _fact(salt, k)
        k += 1
        facts.append(Fact(len(out), text, kind, where))
        return " " + sentence

    turn = 0
    while len(out) < n:
        turn += 1
        out.append(user(f"Step {turn}: check the next part of the service." + plant("user")))
        call = ToolCall(f"call_{turn}", "read_file", f'{{"path": "src/part_{turn}.py"}}')
        out.append(assistant(call, stop_reason="tool_calls"))
        body = (_FILLER * (result_bytes // len(_FILLER) + 1))[:result_bytes]
        out.append(tool(ToolResult(call.id or "", "read_file", (Text(body + plant("tool")),))))
        out.append(assistant(f"Part {turn} looks fine." + plant("assistant"), stop_reason="stop"))
    del out[n:]
    return out, [f for f in facts if f.position < n]


_LINE = re.compile(r"^\[(\d+)\] (user|assistant): (.*)$")
_KEEP = re.compile(r"[A-Z]{1,4}-\d+|/\w+/|https?://|\d+ ms|Decision|Constraint")


class Summaries:
    """A deterministic summarizer (a ``FunctionModel``): keeps the previous summary's lines and
    adds the user and assistant lines of the new messages that hold an identifier (``ABC-123``,
    a path, a URL, a duration), a decision or a constraint (tool output is left out, as summaries
    often do); at most ``max_lines`` lines, the oldest dropped first. ``inputs`` records every
    request text; ``fail`` makes it raise."""

    def __init__(self, *, max_lines: int = 400, fail: BaseException | None = None) -> None:
        self.max_lines = max_lines
        self.fail = fail
        self.inputs: list[str] = []
        self.instructions: list[str | None] = []
        self.model = FunctionModel(self._summarize, name="scripted-summarizer")

    def _summarize(self, messages: Sequence[Message], info: FunctionInfo) -> str:
        text = messages[-1].text
        self.inputs.append(text)
        self.instructions.append(info.instructions)
        if self.fail is not None:
            raise self.fail
        lines: list[str] = []
        previous = re.search(r"<previous-summary>\n(.*?)\n</previous-summary>", text, re.S)
        if previous:
            lines.extend(previous.group(1).splitlines())
        block = re.search(r"<messages[^>]*>\n(.*?)\n</messages>", text, re.S)
        for line in (block.group(1) if block else "").splitlines():
            match = _LINE.match(line)
            if match and _KEEP.search(match.group(3)):
                lines.append(f"- [{match.group(1)}] {match.group(3)[:200]}")
        kept = lines[-self.max_lines :]
        return "\n".join(kept) if kept else "- nothing of note yet"


async def feed(
    compactor: Compactor, messages: Sequence[Message], *, window: int, start: int = 0
) -> list[Prepared]:
    """Feed ``messages`` to ``compactor`` as a run does: the list grows one message at a time and
    ``prepare`` is called before every model request (after each user and tool message)."""
    grown = list(messages[:start])
    out: list[Prepared] = []
    for m in messages[start:]:
        grown.append(m)
        if m.role in ("user", "tool"):
            out.append(await compactor.prepare(grown, window=window))
    return out


def retention(view: Sequence[Message], facts: Sequence[Fact]) -> list[Fact]:
    """The facts whose exact text the view still holds."""
    text = "\n".join(render_message(m, max_part_chars=0) for m in view)
    return [f for f in facts if f.text in text]
