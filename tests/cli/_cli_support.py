"""Helpers for the command-line tests (a module name no other test folder uses)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from typer.testing import Result

from tether import Message, assistant
from tether.models import ModelResponse, Profile, StreamEvent, TextDelta
from tether.models.wire import ConversionReport

Invoke = Callable[..., Result]


def assert_one_line_error(result: Result, *needles: str) -> str:
    """Exit code 2, exactly one line on stderr starting ``tether: error:``, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tether: error: "), lines[0]
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


class InterruptedModel:
    """A model that streams two pieces of text and then receives Ctrl-C (SIGINT to this very
    process) before finishing — what a person pressing Ctrl-C mid-reply does. Registered as the
    ``interrupted`` provider by the chat tests."""

    def __init__(self, name: str = "interrupted") -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def profile(self) -> Profile:
        return Profile(provider="interrupted")

    async def generate(self, messages: Sequence[Message], **_: Any) -> ModelResponse:
        raise AssertionError("the chat streams; generate must not be called")

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[StreamEvent]:
        yield TextDelta(0, "partial ")
        yield TextDelta(0, "answer")
        await asyncio.sleep(0.05)  # let the chat print what it has
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(30)  # cancelled long before this ends
        raise AssertionError("the reply was not canceled by Ctrl-C")


class CountingModel:
    """Replies ``I see N messages`` where N is how many messages the request carried: shows what
    --max-messages / --budget let through. Registered as the ``counting`` provider."""

    def __init__(self, name: str = "counting") -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def profile(self) -> Profile:
        return Profile(provider="counting")

    async def generate(self, messages: Sequence[Message], **_: Any) -> ModelResponse:
        text = f"I see {len(messages)} messages"
        return ModelResponse(assistant(text, model=self._name, provider="counting"), "stop")

    async def stream(self, messages: Sequence[Message], **kwargs: Any) -> AsyncIterator[StreamEvent]:
        response = await self.generate(messages, **kwargs)
        yield TextDelta(0, response.message.text)
        yield response


class LossyModel:
    """Answers, and like a real driver logs what its request could not carry (a WARNING on
    ``tether.models``) and keeps it as ``last_request_report``, and reports a provider item its
    response held as ``last_response_report``. Registered as ``lossy``."""

    def __init__(self, name: str = "lossy") -> None:
        self._name = name
        self.last_request_report: ConversionReport | None = None
        self.last_response_report: ConversionReport | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def profile(self) -> Profile:
        return Profile(provider="lossy")

    async def generate(self, messages: Sequence[Message], **_: Any) -> ModelResponse:
        raise AssertionError("the chat streams")

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[StreamEvent]:
        report = ConversionReport()
        report.approximate(0, 0, "failed flag", "this provider has no failed flag on results")
        self.last_request_report = report
        logging.getLogger("tether.models").warning("lossy request approximated message 0 part 0 failed flag")
        self.last_response_report = ConversionReport()
        self.last_response_report.drop(0, 1, "web_search_call item", "a provider-native item")
        yield TextDelta(0, "fine")
        yield ModelResponse(assistant("fine", provider="lossy", model=self._name), "stop")


class TruncatingModel:
    """Streams a reply that stops at the length limit. Registered as ``truncating``."""

    def __init__(self, name: str = "truncating") -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def profile(self) -> Profile:
        return Profile(provider="truncating")

    async def generate(self, messages: Sequence[Message], **_: Any) -> ModelResponse:
        raise AssertionError("the chat streams")

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[StreamEvent]:
        yield TextDelta(0, "and I'm your guest, and I'm")
        message = assistant("and I'm your guest, and I'm", provider="truncating", stop_reason="length")
        yield ModelResponse(message, "length")


class WindowedModel:
    """A model with a small published context window (1,500 tokens), so ``tether chat`` compacts
    with it: a summarizer request (the compaction prompt) gets a summary naming the positions it
    read; any other request ``I see N messages`` plus a long tail that fills the window quickly.
    Registered as the ``windowed`` provider."""

    def __init__(self, name: str = "windowed") -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def profile(self) -> Profile:
        return Profile(provider="windowed", context_window=1_500)

    async def generate(self, messages: Sequence[Message], **kwargs: Any) -> ModelResponse:
        instructions = kwargs.get("instructions") or ""
        if "compacting the history" in instructions:
            text = messages[-1].text
            first = text.split("[", 1)[1].split("]", 1)[0] if "[" in text else "?"
            summary = f"- summarized from position {first}; the secret word was PELICAN"
            return ModelResponse(assistant(summary, model=self._name, provider="windowed"), "stop")
        reply = f"I see {len(messages)} messages. " + "lorem ipsum dolor sit amet " * 30
        return ModelResponse(assistant(reply, model=self._name, provider="windowed"), "stop")

    async def stream(self, messages: Sequence[Message], **kwargs: Any) -> AsyncIterator[StreamEvent]:
        response = await self.generate(messages, **kwargs)
        yield TextDelta(0, response.message.text)
        yield response


class InterruptedSummaryModel(WindowedModel):
    """``WindowedModel`` whose summarizer request receives Ctrl-C (SIGINT to this very process),
    as when a person stops a slow ``/compact``. Registered as the ``sigsummary`` provider."""

    async def generate(self, messages: Sequence[Message], **kwargs: Any) -> ModelResponse:
        if "compacting the history" in (kwargs.get("instructions") or ""):
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(30)  # cancelled long before this ends
            raise AssertionError("the summary was not canceled by Ctrl-C")
        return await super().generate(messages, **kwargs)
