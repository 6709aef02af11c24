"""The page's files themselves (no browser needed): nothing that parses HTML from a string or
evaluates code, nothing inline the CSP would refuse, nothing fetched from another origin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "src" / "tether" / "serve" / "static"
SCRIPTS = sorted(STATIC.rglob("*.js"))
FORBIDDEN = {
    "innerHTML": re.compile(r"\binnerHTML\b"),
    "outerHTML": re.compile(r"\bouterHTML\b"),
    "insertAdjacentHTML": re.compile(r"\binsertAdjacentHTML\b"),
    "document.write": re.compile(r"\bdocument\.write"),
    "eval": re.compile(r"\beval\s*\("),
    "new Function": re.compile(r"\bnew\s+Function\b"),
    "createContextualFragment": re.compile(r"createContextualFragment"),
    "DOMParser": re.compile(r"\bDOMParser\b"),
    "setTimeout with a string": re.compile(r"setTimeout\(\s*[\"'`]"),
    "an absolute URL": re.compile(r"[\"'`](?:https?:)?//(?!example\.com)"),
}


def test_the_page_has_scripts() -> None:
    assert len(SCRIPTS) >= 5


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_script_parses_html_or_evaluates_code(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = [name for name, pattern in FORBIDDEN.items() if pattern.search(text)]
    assert not found, f"{path.name} uses {found}"


def test_the_html_has_nothing_inline_and_loads_only_its_own_files() -> None:
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "inline script"
    assert "<style" not in html
    assert not re.search(r"\sstyle=", html)
    assert not re.search(r"\son[a-z]+=", html), "inline event handler"
    for url in re.findall(r'(?:src|href)="([^"#]+)"', html):
        assert url.startswith("/static/") or url.startswith("data:"), url
