"""Every recorded request's ``messages`` / ``input`` / ``contents`` imports and exports back.

Import must not lose anything silently: every loss is reported, and only provider-native content
with no tether equivalent may be lost (plus the approximations listed, file by file, in
``EXCUSED``). Every request must export back equal, on every field the provider validates, to the
recorded request with exactly the reported elements removed. Equal spellings are made equal first
(``canonical``): absent vs. ``null`` fields, a lone text as a string vs. a one-block list, Gemini's
snake_case vs. camelCase keys and URL-safe vs. standard base64, output-only ``status`` fields.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tether import convert
from tether.models.wire import Loss

CASES = [
    ("openai-responses", "openai_responses", "input"),
    ("openai-chat", "openai_chat", "messages"),
    ("groq", "openai_chat", "messages"),
    ("ollama", "openai_chat", "messages"),
    ("anthropic", "anthropic", "messages"),
    ("gemini", "gemini", "contents"),
]

# Reported losses a recorded request may have: content with no tether equivalent.
ALLOWED = re.compile(r"tether equivalent|provider-native|tether messages have no phase")

# Other reported approximations, allowed only in the recorded file named, with why.
EXCUSED = {
    ("test_openai_o1_mini_system_role[developer].yaml", "developer role"): (
        "tether has one system role: a `developer` entry imports as a system message"
    ),
}

CONTENT_KEYS = {"anthropic": "content", "gemini": "parts", "openai_chat": "content"}


def _without_reported(entries: list[Any], losses: list[Loss], fmt: str, name: str) -> list[Any]:
    """The recorded entries with exactly what the import reported removed (or, for an excused
    approximation, rewritten the way it was reported), so the export must equal the rest."""
    out = copy.deepcopy(entries)
    removed: set[tuple[int, int | None]] = set()
    for loss in losses:
        entry = out[loss.message]
        if loss.kind == "approximated":
            assert (name, loss.what) in EXCUSED, (name, loss)
            if loss.what == "developer role":
                entry["role"] = "system"
            continue
        target = entry if loss.part is None else entry[CONTENT_KEYS[fmt]][loss.part]
        field = loss.what.split()[-1]  # "cache_control", "videoMetadata", "message phase"
        nested = re.fullmatch(r"tool result content\[(\d+)\] (\w+)", loss.what)
        dropped_block = re.fullmatch(r"tool result (\w+) block", loss.what)
        if nested:
            del target["content"][int(nested[1])][nested[2]]
        elif dropped_block:
            target["content"] = [b for b in target["content"] if b.get("type") != dropped_block[1]]
            if not target["content"]:
                del target["content"]  # an empty result content reads as an absent one
        elif field in target:
            del target[field]
        else:  # a whole block, part, item or message
            removed.add((loss.message, loss.part))
    for mi, pi in sorted(removed, key=lambda r: (r[0], -1 if r[1] is None else r[1]), reverse=True):
        if pi is None:
            del out[mi]
        elif (mi, None) not in removed:
            del out[mi][CONTENT_KEYS[fmt]][pi]
    return out


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
    mismatched: list[str] = []
    for name, index, body in requests:
        messages, imported = format_.load(body[key])
        unexpected = [
            loss
            for loss in imported.losses
            if not ALLOWED.search(loss.reason) and (name, loss.what) not in EXCUSED
        ]
        assert not unexpected, (name, index, unexpected)
        exported, report = format_.dump(messages)
        assert report.lossless, (name, index, report.losses)
        expected = _without_reported(body[key], imported.losses, fmt, name)
        if canonical(exported, fmt) != canonical(expected, fmt):
            mismatched.append(f"{name}#{index}")
    assert mismatched == []


def test_cache_control_is_reported_not_lost(provider_samples: Path) -> None:
    """Anthropic prompt-cache breakpoints have no tether field: import reports each one."""
    requests = _requests(provider_samples / "anthropic", "messages")
    marked = [(n, b) for n, _, b in requests if "cache_control" in json.dumps(b["messages"])]
    assert marked
    for name, body in marked:
        _, report = convert.from_anthropic(body["messages"])
        where = {
            (mi, pi)
            for mi, entry in enumerate(body["messages"])
            if isinstance(entry["content"], list)
            for pi, block in enumerate(entry["content"])
            if "cache_control" in block
        }
        reported = {(x.message, x.part) for x in report.losses if x.what == "cache_control"}
        assert reported == where, name
        assert all(x.kind == "dropped" for x in report.losses if x.what == "cache_control")


def test_request_bodies_carry_their_system_prompt(provider_samples: Path) -> None:
    for name, _, body in _requests(provider_samples / "openai-responses", "input"):
        if body.get("instructions"):
            messages, _ = convert.from_openai_responses(body)
            assert messages[0].role == "system", name
            assert messages[0].text == body["instructions"]
            assert messages[1:] == convert.from_openai_responses(body["input"])[0]
            return
    pytest.fail("no recorded Responses request with instructions")
