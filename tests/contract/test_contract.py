"""The JSON contract is additive only (docs/adr/0001-message-contract.md).

Every version's golden documents must keep decoding; the current schema may only gain fields,
never remove, retype or newly require one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tether

HERE = Path(__file__).parent
VERSIONS = sorted(p for p in HERE.iterdir() if p.is_dir() and p.name.startswith("v"))
GOLDEN = [doc for v in VERSIONS for doc in sorted(v.glob("*.json")) if doc.name != "schema.json"]


def test_there_is_a_folder_for_the_current_version() -> None:
    assert (HERE / f"v{tether.CONTRACT_VERSION}" / "schema.json").is_file()


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_documents_decode(path: Path) -> None:
    data = path.read_bytes()
    if path.name == "message.json":
        message = tether.loads_message(data)
        assert json.loads(tether.dumps_message(message)) == json.loads(data)
        return
    history = tether.loads(data)
    assert history
    # re-encoding yields the same JSON value: nothing was lost or renamed on the way through
    assert json.loads(tether.dumps(history)) == json.loads(data)


def test_golden_history_covers_every_part_kind() -> None:
    history = tether.loads((HERE / "v1" / "history.json").read_bytes())
    kinds = {type(p).__name__ for m in history for p in m.parts}
    assert kinds == {"Text", "Image", "Document", "ToolCall", "ToolResult", "Reasoning"}
    calls = [p for m in history for p in m.parts if isinstance(p, tether.ToolCall)]
    assert any(c.truncated for c in calls)
    assert any(c.id is None for c in calls)
    assert any(m.run_id and m.conversation_id for m in history)


def _defs(schema: dict[str, Any]) -> dict[str, Any]:
    return schema["$defs"]


def additive_problems(version: Path) -> list[str]:
    old = _defs(json.loads((version / "schema.json").read_text()))
    new = _defs(json.loads(json.dumps(tether.json_schema())))
    problems: list[str] = []
    for name, old_def in old.items():
        if name not in new:
            problems.append(f"{name}: removed")
            continue
        new_def = new[name]
        if "enum" in old_def:
            missing = set(old_def["enum"]) - set(new_def.get("enum", []))
            if missing:
                problems.append(f"{name}: enum values removed {sorted(missing)}")
        for field, old_field in old_def.get("properties", {}).items():
            new_field = new_def.get("properties", {}).get(field)
            if new_field is None:
                problems.append(f"{name}.{field}: removed")
            elif {k: v for k, v in new_field.items() if k != "description"} != {
                k: v for k, v in old_field.items() if k != "description"
            }:
                problems.append(f"{name}.{field}: retyped {old_field} -> {new_field}")
        newly_required = set(new_def.get("required", [])) - set(old_def.get("required", []))
        if newly_required:
            problems.append(f"{name}: newly required {sorted(newly_required)}")
    return problems


@pytest.mark.parametrize("version", VERSIONS, ids=lambda p: p.name)
def test_schema_is_additive_only(version: Path) -> None:
    assert additive_problems(version) == []


def test_schema_check_catches_a_removal_and_a_retype(tmp_path: Path) -> None:
    """The additive check itself can fail: feed it a doctored 'old' schema."""
    schema = tether.json_schema()
    doctored = json.loads(json.dumps(schema))
    doctored["$defs"]["Text"]["properties"]["legacy"] = {"type": "string"}
    doctored["$defs"]["ToolCall"]["properties"]["arguments"] = {"type": "object"}
    doctored["$defs"]["Reasoning"]["required"] = ["type", "text"]
    (tmp_path / "v0").mkdir()
    (tmp_path / "v0" / "schema.json").write_text(json.dumps(doctored))
    problems = additive_problems(tmp_path / "v0")
    assert "Text.legacy: removed" in problems
    assert any(p.startswith("ToolCall.arguments: retyped") for p in problems)
    assert len(problems) == 2
