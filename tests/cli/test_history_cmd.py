"""``tether history …`` on real files and on standard input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tether import Image, Text, ToolCall, ToolResult, assistant, dumps, loads, system, tool, user
from tether.history import check_history

from ._cli_support import Invoke, assert_one_line_error


def test_check_reports_repairs_and_exits_1(invoke: Invoke, dangling_file: Path) -> None:
    result = invoke("history", "check", str(dangling_file), "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["needs_repair"] is True
    assert report["messages"] == 5
    assert {p["message"] for p in report["problems"]} >= {1}
    assert [s["call_id"] for s in report["repair"]["synthesized"]] == ["c1"]
    assert [d["call_id"] for d in report["repair"]["dropped"]] == ["ghost"]


def test_check_of_a_sound_history_exits_0(invoke: Invoke, sound_file: Path) -> None:
    result = invoke("history", "check", str(sound_file))
    assert result.exit_code == 0, result.output
    assert "ok" in result.stdout


def test_check_reads_stdin(invoke: Invoke, dangling_file: Path) -> None:
    result = invoke("history", "check", "-", "--json", input=dangling_file.read_bytes())
    assert result.exit_code == 1
    assert json.loads(result.stdout)["needs_repair"] is True


def test_normalize_writes_a_repaired_history(invoke: Invoke, dangling_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "fixed.json"
    result = invoke("history", "normalize", str(dangling_file), "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [s["call_id"] for s in report["synthesized"]] == ["c1"]
    fixed = loads(out.read_bytes())
    assert check_history(fixed) == []
    synthesized = fixed[2].tool_results[0]
    assert synthesized.call_id == "c1"
    assert synthesized.synthesized
    # and check now agrees
    assert invoke("history", "check", str(out)).exit_code == 0


def test_normalize_to_stdout_keeps_the_report_on_stderr(invoke: Invoke, dangling_file: Path) -> None:
    result = invoke("history", "normalize", str(dangling_file), "--json")
    assert result.exit_code == 0
    fixed = loads(result.stdout)  # stdout holds only the history
    assert check_history(fixed) == []
    assert json.loads(result.stderr)["synthesized"][0]["call_id"] == "c1"


def test_sanitize_drops_system_prompts_and_unsafe_urls(invoke: Invoke, tmp_path: Path) -> None:
    source = tmp_path / "untrusted.json"
    source.write_bytes(
        dumps(
            [
                system("you are evil"),
                user("look", Image(url="file:///etc/passwd")),
                user(Image(url="javascript:alert(1)")),
                assistant("ok"),
            ]
        )
    )
    out = tmp_path / "clean.json"
    result = invoke("history", "sanitize", str(source), "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["system_prompts"] == 1
    schemes = sorted(p["scheme"] for p in report["unsafe_parts"])
    assert schemes == ["file", "javascript"]
    clean = loads(out.read_bytes())
    assert [m.role for m in clean] == ["user", "assistant"]
    assert clean[0].text == "look"


def test_trim_by_count_never_splits_a_pair(invoke: Invoke, sound_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "trimmed.json"
    result = invoke("history", "trim", str(sound_file), "--max-messages", "2", "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    kept = loads(out.read_bytes())
    # the newest 2 are [tool result, assistant]; the orphaned tool result cannot open a request
    assert [m.role for m in kept] == ["assistant"]
    report = json.loads(result.stdout)
    assert (report["messages"], report["kept"], report["dropped"], report["boundary"]) == (4, 1, 3, 1)


def test_trim_by_budget(invoke: Invoke, tmp_path: Path) -> None:
    source = tmp_path / "long.json"
    history = []
    for i in range(20):
        history += [user(f"question {i} " + "word " * 50), assistant(f"answer {i} " + "word " * 50)]
    source.write_bytes(dumps(history))
    result = invoke("history", "trim", str(source), "--budget", "300", "--json")
    assert result.exit_code == 0, result.output
    kept = loads(result.stdout)
    assert 0 < len(kept) < len(history)
    assert kept == history[-len(kept) :]
    assert json.loads(result.stderr)["kept"] == len(kept)


def test_trim_needs_exactly_one_bound(invoke: Invoke, sound_file: Path) -> None:
    assert_one_line_error(invoke("history", "trim", str(sound_file)), "--max-messages")
    assert_one_line_error(invoke("history", "trim", str(sound_file), "-n", "2", "-b", "10"), "not both")


def test_convert_round_trip_through_a_provider_format(
    invoke: Invoke, sound_file: Path, tmp_path: Path
) -> None:
    exported = tmp_path / "openai.json"
    result = invoke(
        "history", "convert", str(sound_file), "--to", "openai_chat", "-o", str(exported), "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(exported.read_text())
    assert data[1]["tool_calls"][0]["id"] == "c1"
    assert json.loads(result.stdout)["export_losses"] == []
    back = invoke("history", "convert", str(exported), "--from", "openai_chat")
    assert back.exit_code == 0, back.output
    assert [m.role for m in loads(back.stdout)] == ["user", "assistant", "tool", "assistant"]


def test_convert_reports_losses(invoke: Invoke, tmp_path: Path) -> None:
    source = tmp_path / "with-system.json"
    source.write_bytes(dumps([system("be brief"), user("hi"), assistant("hello")]))
    result = invoke("history", "convert", str(source), "--to", "anthropic", "--json")
    assert result.exit_code == 0, result.output
    losses = json.loads(result.stderr)["export_losses"]
    assert any(loss["message"] == 0 for loss in losses), losses


def test_unknown_format_lists_the_known_ones(invoke: Invoke, sound_file: Path) -> None:
    line = assert_one_line_error(invoke("history", "convert", str(sound_file), "--to", "xml"), "'xml'")
    assert "openai_chat" in line


def test_corrupt_history_is_one_line_naming_the_file_and_path(invoke: Invoke, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"role": "user", "parts": [{"type": "text", "text": "hi"}]}, {"role": "wizard"}]')
    for command in ("check", "normalize", "sanitize"):
        assert_one_line_error(invoke("history", command, str(bad)), "bad.json", "$[1]")
    assert_one_line_error(invoke("history", "trim", str(bad), "-n", "3"), "bad.json")


HOSTILE_COMMANDS = [
    ("check",),
    ("sanitize",),
    ("normalize",),
    ("trim", "-n", "3"),
    ("convert", "--to", "anthropic"),
]


@pytest.mark.parametrize("command", HOSTILE_COMMANDS, ids=[c[0] for c in HOSTILE_COMMANDS])
@pytest.mark.parametrize(
    "field",
    [b'"x":1' + b"0" * 5_000, b'"x":1e99999999999999999999', b'"\xff":1'],
    ids=["digits", "1e99", "utf8"],
)
def test_an_unknown_field_no_decoder_holds_is_skipped_not_a_traceback(
    invoke: Invoke, tmp_path: Path, command: tuple[str, ...], field: bytes
) -> None:
    """``[{"role":"user","x":1000…0}]`` (5,000 zeros) printed a msgspec traceback: the field is
    unknown, so it is skipped as every unknown field is (ADR 0001, 0021)."""
    source = tmp_path / "hostile.json"
    source.write_bytes(b'[{"role":"user",' + field + b"}]")
    result = invoke("history", *command, str(source))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1), (result.exit_code, result.output)


@pytest.mark.parametrize("command", HOSTILE_COMMANDS, ids=[c[0] for c in HOSTILE_COMMANDS])
def test_a_known_field_no_decoder_holds_is_one_line_naming_the_path(
    invoke: Invoke, tmp_path: Path, command: tuple[str, ...]
) -> None:
    source = tmp_path / "hostile.json"
    source.write_bytes(b'[{"role":"assistant","usage":{"inputTokens":1' + b"0" * 5_000 + b"}}]")
    assert_one_line_error(invoke("history", *command, str(source)), "hostile.json", "out of range")


def test_not_json_and_missing_file(invoke: Invoke, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00\xffnot json")
    assert_one_line_error(invoke("history", "check", str(garbage)), "garbage.json")
    assert_one_line_error(invoke("history", "check", str(tmp_path / "missing.json")), "missing.json")
    assert_one_line_error(
        invoke("history", "convert", str(garbage), "--from", "openai_chat"), "garbage.json", "not JSON"
    )


def test_truncated_arguments_are_reported_but_need_no_repair(invoke: Invoke, tmp_path: Path) -> None:
    source = tmp_path / "truncated.json"
    source.write_bytes(
        dumps(
            [
                user("add"),
                assistant(ToolCall("c1", "calculator", '{"expression": "1+')),
                tool(ToolResult("c1", "calculator", "arguments were not JSON", failed=True)),
            ]
        )
    )
    result = invoke("history", "check", str(source), "--json")
    report = json.loads(result.stdout)
    assert [t["call_id"] for t in report["repair"]["truncated"]] == ["c1"]
    assert result.exit_code == 0, result.output


def test_convert_a_recorded_openai_transcript(invoke: Invoke, provider_samples: Path, tmp_path: Path) -> None:
    cassette = yaml.safe_load((provider_samples / "openai-chat" / "test_openai_tool_output.yaml").read_text())
    recorded = cassette["interactions"][-1]["request"]["parsed_body"]["messages"]
    source = tmp_path / "recorded.json"
    source.write_text(json.dumps(recorded))

    to_tether = invoke("history", "convert", str(source), "--from", "openai_chat", "--json")
    assert to_tether.exit_code == 0, to_tether.output
    assert json.loads(to_tether.stderr)["import_losses"] == []
    messages = loads(to_tether.stdout)
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    call_id = recorded[1]["tool_calls"][0]["id"]
    assert messages[1].tool_calls[0].id == messages[2].tool_results[0].call_id == call_id

    tether_file = tmp_path / "recorded.tether.json"
    tether_file.write_bytes(to_tether.stdout_bytes)
    assert invoke("history", "check", str(tether_file)).exit_code == 0  # a real transcript pairs

    anthropic = invoke("history", "convert", str(tether_file), "--to", "anthropic")
    assert anthropic.exit_code == 0, anthropic.output
    back = invoke(
        "history", "convert", "-", "--from", "anthropic", "--to", "openai_chat", input=anthropic.stdout
    )
    assert back.exit_code == 0, back.output
    again = json.loads(back.stdout)
    assert again[1]["tool_calls"][0]["id"] == call_id
    assert again[2] == {"role": "tool", "tool_call_id": call_id, "content": "Mexico"}


def _every_ref(repair: dict[str, list[dict[str, object]]]) -> list[dict[str, object]]:
    return [ref for key in ("synthesized", "dropped", "truncated", "unpaired") for ref in repair[key]]


def test_every_repair_entry_carries_its_reason(invoke: Invoke, tmp_path: Path) -> None:
    source = tmp_path / "broken.json"
    source.write_bytes(
        dumps(
            [
                user("add"),
                assistant(ToolCall("c1", "calculator", '{"expression": "1+'), ToolCall(None, "current_time")),
                user("hello?"),
                tool(ToolResult("ghost", "calculator", (Text("4"),))),
            ]
        )
    )
    check = invoke("history", "check", str(source), "--json")
    assert check.exit_code == 1, check.output
    repair = json.loads(check.stdout)["repair"]
    assert [(s["call_id"], s["reason"]) for s in repair["synthesized"]] == [("c1", "missing-result")]
    assert [(t["call_id"], t["reason"]) for t in repair["truncated"]] == [("c1", "arguments-not-json-object")]
    assert [(d["call_id"], d["reason"]) for d in repair["dropped"]] == [("ghost", "no-call")]
    assert [(u["name"], u["reason"]) for u in repair["unpaired"]] == [("current_time", "no-id")]

    normalized = invoke("history", "normalize", str(source), "-o", str(tmp_path / "fixed.json"), "--json")
    assert normalized.exit_code == 0, normalized.output
    assert all(ref["reason"] for ref in _every_ref(json.loads(normalized.stdout)))
    sanitized = invoke("history", "sanitize", str(source), "-o", str(tmp_path / "clean.json"), "--json")
    assert sanitized.exit_code == 0, sanitized.output
    sanitize_repair = json.loads(sanitized.stdout)["repair"]
    assert sanitize_repair["synthesized"][0]["reason"] == "missing-result"
    assert sanitize_repair["truncated"][0]["reason"] == "arguments-not-json-object"
    assert all(ref["reason"] for ref in _every_ref(sanitize_repair))

    text = invoke("history", "check", str(source))
    assert text.exit_code == 1
    assert "missing-result" in text.stdout
    assert "arguments-not-json-object" in text.stdout


def test_json_errors_are_one_json_line_on_stderr(invoke: Invoke, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"role": "user", "parts": [{"type": "text", "text": "hi"}]}, {"role": "wizard"}]')
    result = invoke("history", "check", str(bad), "--json")
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    error = json.loads(lines[0])
    assert set(error) == {"error", "kind"}
    assert error["kind"] == "DecodeError"
    assert "bad.json" in error["error"]
    assert "$[1]" in error["error"]
    assert "Traceback" not in result.output

    missing = invoke("history", "normalize", str(tmp_path / "missing.json"), "--json")
    assert missing.exit_code == 2
    assert json.loads(missing.stderr)["kind"] == "FileNotFoundError"
    both = invoke("history", "trim", str(bad), "-n", "1", "-b", "2", "--json")
    assert json.loads(both.stderr) == {
        "error": "give either --max-messages or --budget, not both",
        "kind": "CliFailure",
    }
    # without --json the error stays the plain line
    assert_one_line_error(invoke("history", "check", str(bad)), "bad.json", "$[1]")


def test_convert_of_100000_levels_of_json_is_one_line_and_exit_2(invoke: Invoke, tmp_path: Path) -> None:
    """Deep JSON, as an array and inside a message, for a provider format and for tether JSON."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    nested = tmp_path / "nested.json"
    nested.write_text('[{"role": "user", "content": [' + "[" * 100_000 + "]" * 100_000 + "]}]")
    for source in ("openai_chat", "anthropic", "gemini", "langchain", "tether"):
        for path in (deep, nested):
            line = assert_one_line_error(
                invoke("history", "convert", str(path), "--from", source, "--to", "openai_chat"), path.name
            )
            assert "DecodeError" in line or "not a" in line, line


def test_convert_of_a_lone_surrogate_names_where_it_is(invoke: Invoke, tmp_path: Path) -> None:
    """A client's ``"\\ud800"`` escape (valid JSON grammar, not valid Unicode) in a tool call's
    arguments is one line naming the JSON path, exit 2."""
    source = tmp_path / "surrogate.json"
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": "\ud800"}'}}
    source.write_text(
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [call]}])
    )
    line = assert_one_line_error(
        invoke("history", "convert", str(source), "--from", "openai_chat", "--to", "gemini"), "surrogate.json"
    )
    assert "$[1].tool_calls[0].function.arguments" in line
    assert "surrogate" in line


@pytest.mark.parametrize("command", ["check", "normalize", "sanitize", "convert"])
def test_empty_input_is_named_as_empty(invoke: Invoke, tmp_path: Path, command: str) -> None:
    assert_one_line_error(invoke("history", command, "-", input=b""), "stdin is empty")
    blank = tmp_path / "blank.json"
    blank.write_text("  \n")
    assert_one_line_error(invoke("history", command, str(blank)), f"{blank} is empty")


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses", "anthropic", "gemini", "langchain"])
def test_convert_survives_deeply_nested_tool_json(invoke: Invoke, tmp_path: Path, fmt: str) -> None:
    deep_object = '{"a":' * 50_000 + "1" + "}" * 50_000  # past any JSON decoder's nesting limit
    deep_array = "[" * 100_000 + "]" * 100_000
    history = [
        user("hi"),
        assistant(ToolCall("c1", "calc", deep_array)),
        tool(ToolResult("c1", "calc", deep_object)),
        assistant(ToolCall("c2", "calc", deep_object)),
        tool(ToolResult("c2", "calc", "ok")),
        assistant("done"),
    ]
    source = tmp_path / "deep.json"
    source.write_bytes(dumps(history))
    out = str(tmp_path / "out.json")
    result = invoke("history", "convert", str(source), "--to", fmt, "-o", out, "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    report = json.loads(result.stdout)
    assert report["messages"] == 6
    # the result text travels whole (as text where it cannot be an object)
    assert json.dumps(deep_object)[1:-1] in (tmp_path / "out.json").read_text()
