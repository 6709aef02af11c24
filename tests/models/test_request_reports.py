"""Every driver keeps the conversion report of its latest request (``last_request_report``) and
logs each loss once at WARNING on the ``tether.models`` logger (ADR 0005): a run that resends the
same history at every step is told about a dropped part once, not at every step."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from tether import Message, Reasoning, assistant, user
from tether.models.anthropic import AnthropicModel
from tether.models.gemini import GeminiModel
from tether.models.openai_chat import OpenAIChatModel
from tether.models.openai_responses import OpenAIResponsesModel
from tether.models.wire import ConversionReport


class _Driver(Protocol):
    @property
    def last_request_report(self) -> ConversionReport | None: ...


Build = Callable[[Sequence[Message]], Any]


def _anthropic(_: Path) -> tuple[_Driver, Build]:
    model = AnthropicModel("claude-sonnet-4-5", api_key="test-key")
    return model, model.request


def _gemini(_: Path) -> tuple[_Driver, Build]:
    model = GeminiModel("gemini-2.5-flash", api_key="test-key")
    return model, model.request


def _openai_chat(_: Path) -> tuple[_Driver, Build]:
    model = OpenAIChatModel("gpt-4o", api_key="test-key")
    return model, model.request


def _openai_responses(_: Path) -> tuple[_Driver, Build]:
    model = OpenAIResponsesModel("gpt-5", api_key="test-key")
    return model, model.request_body


def _local(tmp_path: Path) -> tuple[_Driver, Build]:
    local = pytest.importorskip("tether.models.local", reason="llama-cpp-python missing (tether[local])")
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"")  # building a request loads no weights
    model = local.LocalModel(weights)
    return model, model.request


DRIVERS = {
    "anthropic": _anthropic,
    "gemini": _gemini,
    "openai_chat": _openai_chat,
    "openai_responses": _openai_responses,
    "local": _local,
}


def _history() -> list[Message]:
    foreign = assistant(
        Reasoning("thoughts of another provider", signature="c2ln", provider="elsewhere"),
        "answer",
        provider="elsewhere",
        model="other-model-1",
    )
    return [user("question"), foreign, user("and then?")]


def _foreign_drops(report: ConversionReport) -> list[tuple[int, int | None, str]]:
    return [
        (loss.message, loss.part, loss.what)
        for loss in report.losses
        if loss.kind == "dropped" and loss.what == "reasoning"
    ]


@pytest.mark.parametrize("name", sorted(DRIVERS))
def test_dropped_foreign_reasoning_is_in_the_drivers_last_report(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model, build = DRIVERS[name](tmp_path)
    assert model.last_request_report is None
    history = _history()
    with caplog.at_level(logging.WARNING, logger="tether.models"):
        build(history)
        first = model.last_request_report
        assert first is not None
        assert _foreign_drops(first) == [(1, 0, "reasoning")]
        # the next step of the run resends the same messages plus new ones
        build([*history, assistant("sure"), user("more")])
    second = model.last_request_report
    assert second is not None
    assert second is not first
    assert _foreign_drops(second) == [(1, 0, "reasoning")]
    told = [r for r in caplog.records if r.name == "tether.models" and "reasoning" in r.getMessage()]
    assert len(told) == 1, [r.getMessage() for r in told]
    assert told[0].levelno == logging.WARNING
    assert "message 1 part 0" in told[0].getMessage()


@pytest.mark.parametrize("name", sorted(DRIVERS))
def test_a_lossless_request_has_an_empty_report_and_logs_nothing(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model, build = DRIVERS[name](tmp_path)
    with caplog.at_level(logging.WARNING, logger="tether.models"):
        build([user("question"), assistant("answer"), user("next")])
    report = model.last_request_report
    assert report is not None
    assert report.lossless
    assert [r for r in caplog.records if r.name == "tether.models"] == []
