"""The real entry point in a separate process: errors are one line, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether import loads


def _tether(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "TETHER_DB": str(cwd / "default.db")}
    env.pop("TETHER_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "tether.cli", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("history", "check", "corrupt.json"),
        ("history", "convert", "wizard.json", "--from", "openai_chat"),
        ("chat", "-m", "nope:model", "hi"),
        ("logs", "list", "--db", "garbage.db"),
        ("chat", "-m", "test", "--db", "garbage.db", "hi"),
    ],
)
def test_bad_input_is_one_line_without_traceback(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "corrupt.json").write_text('[{"role": "user", "parts": [{"type": "text"}]}]')
    (tmp_path / "garbage.db").write_bytes(b"not a database " * 100)
    (tmp_path / "wizard.json").write_text('[{"role": "wizard", "content": "abracadabra"}]')
    done = _tether(*args, cwd=tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert stderr.startswith("tether: error: ")


def test_demo_output_is_a_tether_history(tmp_path: Path) -> None:
    done = _tether("demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert len(loads(done.stdout)) == 8


def test_stdin_pipeline(tmp_path: Path) -> None:
    demo = _tether("demo", cwd=tmp_path).stdout
    checked = _tether("history", "check", "-", "--json", cwd=tmp_path, stdin=demo)
    assert checked.returncode == 0, checked.stderr.decode()
    assert b'"needs_repair": false' in checked.stdout


def test_undecodable_input_in_a_session_is_refused_and_the_session_goes_on(tmp_path: Path) -> None:
    # a strict UTF-8 stdin (the default under a UTF-8 locale on macOS, and with PYTHONIOENCODING)
    env = {**os.environ, "TETHER_DB": str(tmp_path / "chat.db"), "PYTHONIOENCODING": "utf-8:strict"}
    env.pop("TETHER_MODEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "tether.cli", "chat", "-m", "test"],
        cwd=tmp_path,
        env=env,
        input=b"caf\xc3 au lait\nplain tea\n/history\n",
        capture_output=True,
        timeout=120,
        check=False,
    )
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, err
    assert "Traceback" not in err
    assert "not valid text (a lone surrogate at character 3" in out
    assert "nothing was sent" in out
    assert "plain tea" in out  # the next line was sent and /history shows it
    listed = _tether("logs", "show", "--json", "--db", str(tmp_path / "chat.db"), cwd=tmp_path)
    assert [m.text for m in loads(listed.stdout) if m.role == "user"] == ["plain tea"]


def test_a_file_name_that_is_not_utf8_is_printed_escaped_on_a_strict_stdout(tmp_path: Path) -> None:
    if sys.platform != "linux":
        pytest.skip("file names of arbitrary bytes are a Linux matter")
    demo = _tether("demo", cwd=tmp_path).stdout
    name = b"caf\xe9.json"  # Latin-1 bytes: not UTF-8
    (tmp_path / os.fsdecode(name)).write_bytes(demo)
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    db = str(tmp_path / os.fsdecode(b"chat\xff.db"))
    expected = (b"caf\\udce9.json: ok", b"database     " + os.fsencode(str(tmp_path)) + b"/chat\\udcff.db")
    for args, shown in zip(
        (["history", "check", os.fsdecode(name)], ["chat", "-m", "test", "--db", db]), expected, strict=True
    ):
        done = subprocess.run(
            [sys.executable, "-m", "tether.cli", *args],
            cwd=tmp_path,
            env=env,
            input=b"/ids\n",
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
        assert b"Traceback" not in done.stderr
        assert shown in done.stdout, done.stdout
