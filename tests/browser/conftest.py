"""Browser tests: Debian's chromium driven by Playwright for Python against ``tether serve``
started as a subprocess with a scripted model (tests/browser/scripted.py).

No browser is ever downloaded: the system ``chromium`` is launched by path. Without it the tests
are skipped with the reason (and fail in CI, where .ci/run installs it). Every page fails its
test on a JavaScript error or a Content-Security-Policy violation. Screenshots of the main states
go to tests/browser/artifacts/ (git-ignored).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.serve._serve_support import Database, Server, add_user

ARTIFACTS = Path(__file__).parent / "artifacts"
MODEL = "py:tests.browser.scripted:page_model"
TOOLS = "py:tests.browser.scripted:tools"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
TIMEOUT_MS = 20_000
# the page asks /v1/me once without a token (a --no-auth service answers it): that 401 is expected
ALWAYS_ALLOWED = (re.compile(r"Failed to load resource: the server responded with a status of 401"),)


def chromium_path() -> str:
    path = os.environ.get("TETHER_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        reason = "Debian's chromium is not installed (apt-get install chromium; .ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One browser per test module. Not per session: Playwright's sync API keeps an event loop
    running in this thread while it is open, and every later test that calls ``asyncio.run``
    would fail."""
    executable = chromium_path()
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright (the dev extra) is not installed"
    )
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class Service:
    """A running ``tether serve`` and the tokens of its users."""

    server: Server
    tokens: dict[str, str] = field(default_factory=lambda: {})

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One service for the tests that do not stop it (each test makes its own conversations)."""
    tmp = tmp_path_factory.mktemp("browser")
    db = Database("sqlite", path=tmp / "serve.db")
    tokens = {name: add_user(db, name) for name in ("alice", "bob")}
    server = Server(db, model=MODEL, tools=TOOLS, extra_env={"TETHER_TEST_EFFECTS": str(tmp / "fx")})
    server.start(tmp)
    yield Service(server, tokens)
    server.stop()
    assert "Traceback" not in server.log(), server.log()[-3000:]


@dataclass
class Tab:
    """A page plus what it logged; ``allow`` adds console errors the test expects."""

    page: Any
    base: str
    errors: list[str] = field(default_factory=lambda: [])
    allow: list[re.Pattern[str]] = field(default_factory=lambda: [])

    def unexpected(self) -> list[str]:
        patterns = (*ALWAYS_ALLOWED, *self.allow)
        return [e for e in self.errors if not any(p.search(e) for p in patterns)]


@pytest.fixture
def open_tab(browser: Any) -> Iterator[Callable[..., Tab]]:
    """Open pages in fresh browser contexts (a context is a tab's own sessionStorage)."""
    contexts: list[Any] = []
    tabs: list[Tab] = []

    def open_(base: str, *, viewport: tuple[int, int] = (1200, 820)) -> Tab:
        context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        tab = Tab(page, base)
        page.on("console", lambda m: tab.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: tab.errors.append(f"uncaught: {e}"))
        tabs.append(tab)
        page.goto(base + "/")
        return tab

    yield open_
    problems = [(t.base, t.unexpected()) for t in tabs if t.unexpected()]
    for context in contexts:
        context.close()
    assert not problems, f"the page logged errors: {problems}"


def shot(tab: Tab, name: str) -> None:
    """Save a screenshot of the page's current state as a test artifact."""
    ARTIFACTS.mkdir(exist_ok=True)
    tab.page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
