"""docs/compatibility.md is generated from the drivers' own ``PROFILES`` and must not go stale."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tether.models import PROVIDERS, Profile
from tether.models._compat import collect, main, render

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "docs" / "compatibility.md"


def _all_drivers_importable() -> None:
    if importlib.util.find_spec("llama_cpp") is None and not os.environ.get("CI"):
        pytest.skip("llama-cpp-python is not installed: the local driver's profiles cannot be read")


def test_the_committed_matrix_is_current() -> None:
    _all_drivers_importable()
    expected = render()
    assert MATRIX.read_text(encoding="utf-8") == expected, (
        "docs/compatibility.md is stale: run python -m tether.models._compat"
    )


def test_every_declared_profile_has_a_row() -> None:
    _all_drivers_importable()
    rows, undeclared = collect()
    text = render()
    assert {prefix for prefix, _ in rows} | set(undeclared) == set(PROVIDERS)
    for prefix, profile in rows:
        assert isinstance(profile, Profile)
        family = f"`{profile.family}`" if profile.family else "(any)"
        assert f"| `{prefix}` | `{profile.provider}` | {family} |" in text
    assert "| `openai` | `openai` | (any) | yes | yes | yes | — | — | yes | yes | (any) | `never` |" in text


def test_check_mode_reports_staleness(tmp_path: Path) -> None:
    _all_drivers_importable()
    target = tmp_path / "compatibility.md"
    assert main([str(target), "--check"]) == 1
    assert main([str(target)]) == 0
    assert main([str(target), "--check"]) == 0
    target.write_text(target.read_text(encoding="utf-8").replace("`never`", "`always`", 1), encoding="utf-8")
    assert main([str(target), "--check"]) == 1


def test_document_types_are_enforced_before_any_request() -> None:
    from tether import Document, UnsupportedContent, user
    from tether.models.wire import check_content

    profile = Profile("p", documents=True, document_types=("application/pdf", "text/*"))
    check_content([user(Document(data=b"%PDF", media_type="application/pdf"))], profile)
    check_content([user(Document(data=b"# t", media_type="text/markdown"))], profile)
    with pytest.raises(UnsupportedContent, match="not application/zip") as caught:
        check_content([user("x"), user("y", Document(data=b"PK", media_type="application/zip"))], profile)
    assert (caught.value.message_index, caught.value.part_index) == (1, 1)
    # a URL document is not subject to the inline type list
    check_content(
        [user(Document(url="https://example.com/a.zip"))],
        Profile("p", documents=True, document_urls=True, document_types=("application/pdf",)),
    )
