"""``tether chat -m``: a provider model, or any GGUF file by its path (``local:PATH`` or the bare
path); a missing or non-GGUF file is one clear line before anything loads."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tether.cli._common import CliFailure
from tether.cli._model import gguf_path, resolve_model
from tether.errors import UserError
from tether.models import infer_model

from ._cli_support import Invoke, assert_one_line_error


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))  # the magic is all -m checks; weights load on first use
    return path


def test_a_gguf_file_is_named_by_path_or_with_the_local_prefix(
    gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert gguf_path(str(gguf)) == gguf
    assert gguf_path(f"local:{gguf}") == gguf
    monkeypatch.setenv("HOME", str(tmp_path))
    assert gguf_path("~/tiny-model.gguf") == gguf
    assert gguf_path("local:~/tiny-model.gguf") == gguf
    renamed = tmp_path / "weights.bin"  # any extension: an existing file given by path
    renamed.write_bytes(gguf.read_bytes())
    assert gguf_path(str(renamed)) == renamed
    for provider_spec in ("local", "test", "openai:gpt-4o", "anthropic:claude-x", "nope:thing"):
        assert gguf_path(provider_spec) is None


def test_a_missing_or_foreign_file_fails_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(CliFailure, match=r"no GGUF file at .*missing\.gguf"):
        gguf_path(str(tmp_path / "missing.gguf"))
    with pytest.raises(CliFailure, match="no GGUF file"):
        gguf_path(f"local:{tmp_path / 'missing.gguf'}")
    text = tmp_path / "notes.gguf"
    text.write_text("just some notes")
    with pytest.raises(CliFailure, match="is not a GGUF model file"):
        gguf_path(str(text))


def test_chat_with_a_path_that_is_not_there(invoke: Invoke, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"
    assert_one_line_error(invoke("chat", "-m", str(missing), "hi"), "no GGUF file at", "model.gguf")
    assert_one_line_error(invoke("chat", "-m", "nope:thing", "hi"), "unknown model", ".gguf")


def test_resolve_model_builds_a_local_model_from_the_path(gguf: Path) -> None:
    if importlib.util.find_spec("llama_cpp") is None:  # without the extra: the usual one line
        with pytest.raises(CliFailure, match=r"tether\[local\]"):
            resolve_model(str(gguf))
        return
    model = resolve_model(str(gguf))
    assert model.name == "local:tiny-model"
    assert model.profile.provider == "local"
    assert resolve_model(f"local:{gguf}").name == "local:tiny-model"


def test_a_hosted_provider_without_a_model_name_is_one_line(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for spec in ("openai:", "openai", "openai: "):
        assert_one_line_error(invoke("chat", "-m", spec, "hi"), "needs a model name", "openai:MODEL")
    monkeypatch.delenv("OPENAI_API_KEY")
    # the spec is wrong whatever the key: that is what is said first
    assert_one_line_error(invoke("chat", "-m", "openai:", "hi"), "needs a model name")
    with pytest.raises(UserError, match="needs a model name"):  # the library says it too
        infer_model("anthropic:")
