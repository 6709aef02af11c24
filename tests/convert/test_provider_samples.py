"""Every recorded request's ``messages`` / ``input`` / ``contents`` imports and exports back.

Import must not lose anything silently: every loss is reported, and only provider-native content
with no tether equivalent may be lost. A request that imports without a reported loss must export
back equal on every field the provider validates. Equal spellings are made equal first
(``canonical``): absent vs. ``null`` fields, a lone text as a string vs. a one-block list, Gemini's
snake_case vs. camelCase keys and URL-safe vs. standard base64, output-only ``status`` fields.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tether import convert

CASES = [
    ("openai-responses", "openai_responses", "input"),
    ("openai-chat", "openai_chat", "messages"),
    ("groq", "openai_chat", "messages"),
    ("ollama", "openai_chat", "messages"),
    ("anthropic", "anthropic", "messages"),
    ("gemini", "gemini", "contents"),
]

# Reported losses a recorded request may have: content with no tether equivalent.
ALLOWED = re.compile(
    r"tether equivalent|provider-native|tether messages have no phase|imported as a system message"
)


# Recorded requests another module does not carry yet, with why (kept visible, not skipped).
KNOWN_GAPS = {
    "test_anthropic_cache_bedrock_real_api.yaml": "the Anthropic wire drops `cache_control` without a report",
}


def _requests(folder: Path, key: str) -> list[tuple[str, int, dict[str, Any]]]:
    out: list[tuple[str, int, dict[str, Any]]] = []
    for path in sorted(folder.glob("*.yaml")):
        for index, interaction in enumerate(yaml.safe_load(path.read_text())["interactions"]):
            request = interaction["request"]
            body = request.get("parsed_body")
            if body is None and isinstance(request.get("body"), str) and request["body"].startswith("{"):
                body = json.loads(request["body"])
            if isinstance(body, dict) and isinstance(body.get(key), list):
                out.append((path.name, index, body))
    return out


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(w.title() for w in rest)


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_") + "=" * (-len(text) % 4))


def canonical(value: Any, fmt: str, key: str = "") -> Any:
    """One spelling for values the provider reads the same way (see the module docstring)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is None or (fmt == "openai_responses" and k == "status"):
                continue
            name = _camel(k) if fmt == "gemini" else k
            out[name] = canonical(v, fmt, name)
        if fmt == "gemini" and "inlineData" in out and isinstance(out["inlineData"].get("data"), str):
            out["inlineData"]["data"] = _b64(out["inlineData"]["data"])
        if out.get("role") == "developer":
            out["role"] = "system"  # reported as approximated
        return out
    if isinstance(value, list):
        items = [canonical(v, fmt) for v in value]
        if key == "content" and len(items) == 1 and isinstance(items[0], dict):
            block = items[0]
            if block.get("type") in ("text", "input_text") and set(block) == {"type", "text"}:
                return block["text"]
        return items
    return value


@pytest.mark.parametrize(("folder", "fmt", "key"), CASES)
def test_recorded_requests_import_and_export_back(
    provider_samples: Path, folder: str, fmt: str, key: str
) -> None:
    requests = _requests(provider_samples / folder, key)
    assert requests, folder
    format_ = convert.FORMATS[fmt]
    exact = 0
    mismatched: list[str] = []
    for name, index, body in requests:
        messages, imported = format_.load(body[key])
        unexpected = [loss for loss in imported.losses if not ALLOWED.search(loss.reason)]
        assert not unexpected, (name, index, unexpected)
        exported, report = format_.dump(messages)
        assert report.lossless, (name, index, report.losses)
        if any(loss.kind == "dropped" for loss in imported.losses):
            continue  # provider-native content was dropped (and reported): not comparable
        if canonical(exported, fmt) == canonical(body[key], fmt):
            exact += 1
        else:
            mismatched.append(f"{name}#{index}")
    assert [m for m in mismatched if m.split("#")[0] not in KNOWN_GAPS] == []
    assert exact > 0


def test_request_bodies_carry_their_system_prompt(provider_samples: Path) -> None:
    for name, _, body in _requests(provider_samples / "openai-responses", "input"):
        if body.get("instructions"):
            messages, _ = convert.from_openai_responses(body)
            assert messages[0].role == "system", name
            assert messages[0].text == body["instructions"]
            assert messages[1:] == convert.from_openai_responses(body["input"])[0]
            return
    pytest.fail("no recorded Responses request with instructions")
