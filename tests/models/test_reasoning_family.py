"""Reasoning is replayed only to the same provider and model family (issue 6, ADR 0005): every
reasoning-capable profile declares ``same-family``; reasoning and signatures from another family
of the same provider are dropped and reported."""

from __future__ import annotations

import pytest

from tether import Message, Reasoning, Text, ToolCall, assistant, user
from tether.models import Profile
from tether.models._compat import collect
from tether.models.wire import anthropic as anthropic_wire
from tether.models.wire import gemini as gemini_wire
from tether.models.wire import openai_responses as responses_wire
from tether.models.wire import replays_reasoning
from tether.models.wire._common import best_profile, fallback_id, in_family


@pytest.mark.parametrize(
    ("model", "family", "inside"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4", True),
        ("claude-opus-4-1", "claude-sonnet-4", False),
        ("eu.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4", True),
        ("models/gemini-2.5-flash", "gemini-2.5", True),
        ("gemini-2.5-pro", "gemini-3", False),
        ("gpt-5.2-2025-12-11", "gpt-5", True),
        ("o3-2025-04-16", "gpt-5", False),
        (None, "claude-opus-4", True),  # an imported transcript: origin unknown
        ("anything", "", False),
    ],
)
def test_family_membership(model: str | None, family: str, inside: bool) -> None:
    assert in_family(model, family) is inside


def test_every_reasoning_capable_profile_is_same_family() -> None:
    rows, _ = collect()
    replaying = [(prefix, p) for prefix, p in rows if p.reasoning_replay != "never"]
    assert replaying
    assert all(p.reasoning_replay == "same-family" and p.family for _, p in replaying), replaying


def _thinking(model: str | None) -> Message:
    return assistant(
        Reasoning("plan", signature="c2ln", provider="anthropic"), "done", provider="anthropic", model=model
    )


def test_anthropic_replays_thinking_within_the_family_only() -> None:
    target = anthropic_wire.profile_for("claude-sonnet-4-5")
    assert target.family == "claude-sonnet-4"
    same = _thinking("claude-sonnet-4-20250514")
    encoded, report = anthropic_wire.encode_messages([user("q"), same], profile=target)
    assert encoded[1]["content"][0] == {"type": "thinking", "thinking": "plan", "signature": "c2ln"}
    assert report.lossless
    other = _thinking("claude-opus-4-1-20250805")
    encoded, report = anthropic_wire.encode_messages([user("q"), other], profile=target)
    assert encoded[1]["content"] == [{"type": "text", "text": "done"}]
    assert [(x.message, x.part, x.kind, x.what) for x in report.losses] == [(1, 0, "dropped", "reasoning")]


def test_a_later_claude_model_is_its_own_family() -> None:
    target = anthropic_wire.profile_for("claude-opus-5-20260101")
    assert (target.family, target.reasoning_replay) == ("claude-opus-5", "same-family")
    encoded, report = anthropic_wire.encode_messages([_thinking("claude-opus-4-6")], profile=target)
    assert encoded[0]["content"] == [{"type": "text", "text": "done"}]
    assert not report.lossless
    encoded, report = anthropic_wire.encode_messages([_thinking("claude-opus-5")], profile=target)
    assert encoded[0]["content"][0]["type"] == "thinking"
    assert report.lossless


def test_gemini_sends_signatures_only_within_the_family() -> None:
    def turn(model: str) -> Message:
        return assistant(
            Reasoning("idea", signature="dGhvdWdodA==", provider="google"),
            ToolCall("c1", "f", "{}", signature="c2lnbmVk"),
            provider="google",
            model=model,
        )

    target = gemini_wire.profile_for("gemini-3-pro-preview")
    assert target.family == "gemini-3"
    encoded, report = gemini_wire.encode_messages([user("q"), turn("gemini-3-pro-preview")], profile=target)
    assert report.lossless
    assert [p.get("thoughtSignature") for p in encoded[1]["parts"]] == ["dGhvdWdodA==", "c2lnbmVk"]
    encoded, report = gemini_wire.encode_messages([user("q"), turn("gemini-2.5-flash")], profile=target)
    # another family: its thoughts and signatures are not sent; the call gets Google's placeholder
    assert encoded[1]["parts"] == [
        {
            "functionCall": {"name": "f", "args": {}, "id": "c1"},
            "thoughtSignature": gemini_wire.FOREIGN_CALL_SIGNATURE,
        }
    ]
    assert [(x.part, x.kind, x.what) for x in report.losses] == [
        (0, "dropped", "reasoning"),
        (1, "dropped", "signature"),
        (1, "approximated", "signature"),
    ]


def test_responses_replays_encrypted_reasoning_within_the_family_only() -> None:
    def turn(model: str) -> Message:
        return assistant(
            Reasoning("", signature="gAAAA-encrypted", provider="openai", provider_id="rs_1"),
            Text("done"),
            provider="openai",
            model=model,
        )

    target = responses_wire.default_profile("gpt-5.2")
    assert (target.family, target.reasoning_replay) == ("gpt-5", "same-family")
    items, report = responses_wire.encode_messages([turn("gpt-5-2025-08-07")], profile=target)
    assert items[0] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "encrypted_content": "gAAAA-encrypted",
    }
    assert report.lossless
    items, report = responses_wire.encode_messages([turn("o3-2025-04-16")], profile=target)
    assert [item.get("role") for item in items] == ["assistant"]
    assert all(item.get("type") != "reasoning" for item in items)
    assert ("dropped", "reasoning") in [(x.kind, x.what) for x in report.losses]


def test_replays_reasoning_follows_the_declared_mode() -> None:
    part = Reasoning("r", signature="s", provider="anthropic")
    message = _thinking("claude-haiku-4-5")
    assert replays_reasoning(part, message, anthropic_wire.profile_for("claude-haiku-4-5"))
    assert not replays_reasoning(part, message, anthropic_wire.profile_for("claude-sonnet-4-5"))
    assert not replays_reasoning(part, message, anthropic_wire.profile_for("claude-3-opus-latest"))
    assert not replays_reasoning(part, message, gemini_wire.profile_for("gemini-2.5-pro"))


def test_the_longest_family_prefix_picks_the_profile() -> None:
    generic = Profile("p")
    short, long, tie = Profile("p", family="m-1"), Profile("p", family="m-1.5"), Profile("q", family="m-1")
    assert best_profile([short, long, tie], "m-1.5-pro", generic) is long
    assert best_profile([short, tie, long], "m-1-mini", generic) is short  # the first of equals
    assert best_profile([short, long], "other", generic) is generic
    assert best_profile([generic, short], "other", Profile("d")) is generic  # "" matches every name


def test_fallback_ids_are_deterministic_per_call() -> None:
    first = fallback_id(0, "f", "{}", prefix="toolu_tether_")
    assert first == fallback_id(0, "f", "{}", prefix="toolu_tether_")
    assert first.startswith("toolu_tether_")
    assert len(first) == len("toolu_tether_") + 24
    assert fallback_id(1, "f", "{}") != fallback_id(0, "f", "{}")
    assert fallback_id(0, "f", "{}").startswith("call_")
