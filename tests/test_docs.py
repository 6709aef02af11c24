"""Every ```python block in README.md and docs/ runs (blocks of one file share a namespace, in
order). A block preceded by a line ``<!-- not-run: reason -->`` is skipped with that reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"(?:<!-- not-run: (?P<why>[^>]*) -->\s*\n)?```python\n(?P<code>.*?)```", re.S)


def _blocks(path: Path) -> list[tuple[str, str | None]]:
    return [(m["code"], m["why"]) for m in BLOCK.finditer(path.read_text())]


DOCS_WITH_CODE = [p for p in DOCS if _blocks(p)]


def test_readme_has_code() -> None:
    assert _blocks(ROOT / "README.md")


@pytest.mark.parametrize("path", DOCS_WITH_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_examples_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    for i, (code, why) in enumerate(_blocks(path)):
        if why:
            continue
        try:
            exec(compile(code, f"{path.name}[block {i}]", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure message is the point
            pytest.fail(f"{path.name} block {i} failed: {type(exc).__name__}: {exc}")
