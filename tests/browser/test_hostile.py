"""The page against hostile text and hostile links, and against a service that fails when the
page loads: in a real browser (see conftest.py), waiting on states of the page, never on time."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from tests.browser.conftest import Service, Tab, shot
from tests.browser.test_page import chat, sign_in, stored_answers

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")
expect = sync_api.expect

PWN = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
HOSTILE_MARKDOWN = "\n".join(
    [
        "[click](javascript:window.__pwned=3) [d](data:text/html,<script>alert(1)</script>)",
        "![img](https://images.example/track.png) ![x](javascript:window.__pwned=4)",
        "[https://good.example](https://other.example/) and [a\\](http://inner.example) b](http://outer.example)",
        "Bare: https://bare.example/path?q=1, and <https://angle.example/a>.",
        "[](https://empty.example/)",
        f'```js" onmouseover="window.__pwned=5\n{PWN}\n```',
        f"**{PWN}** `{PWN}` > {PWN}",
    ]
)
# Each line alone took the previous renderer minutes to hours (backtracking regular expressions
# scanning to the end of the line from every opener); a linear renderer takes milliseconds.
PATHOLOGICAL = "\n".join(
    [
        "a " + "`" * 100_000 + " a",
        "a " + "[" * 100_000,
        "a " + "![" * 50_000,
        "# a" + " " * 100_000 + "x",
        "```" + " " * 100_000 + "`",
        " **a" * 25_000,
        " _a" * 30_000,
        "[a](" + "x" * 100_000,
        "the end of a long answer",
    ]
)
NO_NESTED_LINKS = """() => [...document.querySelectorAll('#messages a')].map(a => ({
  href: a.getAttribute('href'), text: a.textContent, nested: a.querySelectorAll('a').length,
}))"""


def imported(service: Service, user: str, history: list[dict[str, Any]]) -> str:
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {service.tokens[user]}"}) as c:
        r = c.post("/v1/conversations/import", json={"format": "tether", "data": history}, timeout=60)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def assistant_says(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "parts": [{"type": "text", "text": "say it"}]},
        {"role": "assistant", "parts": [{"type": "text", "text": text}]},
    ]


@pytest.fixture
def alice(service: Service, open_tab: Callable[..., Tab]) -> Tab:
    tab = open_tab(service.url)
    sign_in(tab, service.tokens["alice"])
    return tab


def test_hostile_markdown_gives_single_safe_named_links_and_no_markup(service: Service, alice: Tab) -> None:
    cid = imported(service, "alice", assistant_says(HOSTILE_MARKDOWN))
    page = alice.page
    page.goto(f"{service.url}/#c/{cid}")
    answer = stored_answers(alice).last
    expect(answer).to_contain_text("Bare:")
    links = page.evaluate(NO_NESTED_LINKS)
    assert all(link["nested"] == 0 for link in links), links  # a bare URL was 8 nested links
    assert all(re.match(r"(https?|mailto):", link["href"]) for link in links), links
    assert all(link["text"].strip() for link in links), links  # every link has a name
    hrefs = [link["href"] for link in links]
    assert hrefs.count("https://bare.example/path?q=1") == 1
    assert hrefs.count("https://angle.example/a") == 1
    assert "http://inner.example/" not in hrefs  # no link inside a link's label
    assert "https://empty.example/" in hrefs
    expect(answer.locator("img, script, iframe, b")).to_have_count(0)
    expect(answer).to_contain_text("[click](javascript:window.__pwned=3)")
    expect(answer).to_contain_text(PWN)
    for link in answer.locator("a").all():
        link.hover()
    assert page.evaluate("window.__pwned") is None
    shot(alice, "14-hostile-markdown")


HOSTILE_NAMES = [
    {"role": "user", "parts": [{"type": "text", "text": f"{PWN} first prompt"}]},
    {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": PWN},
            {"type": "tool-call", "id": f'c1" onmouseover="{PWN}', "name": f"tool{PWN}", "arguments": PWN},
        ],
    },
    {"role": "user", "parts": [{"type": "text", "text": "next"}]},
]


def test_hostile_names_ids_and_arguments_stay_text_in_the_report_cards_and_list(alice: Tab) -> None:
    page = alice.page
    page.get_by_role("button", name="Import…").click()
    page.get_by_label("or paste it").fill(json.dumps(HOSTILE_NAMES))
    page.locator("#import-dialog").get_by_role("button", name="Import", exact=True).click()
    report = page.locator("#import-report")
    expect(report.locator("[data-kind='repair']")).to_contain_text(
        f'tool call c1" onmouseover="{PWN} (tool{PWN})'
    )
    page.get_by_role("button", name="Open the conversation").click()
    card = page.locator(".tool-card").last
    expect(card).to_have_attribute("data-state", "synthesized")
    expect(card.locator(".tool-name")).to_have_text(f"tool{PWN}")
    expect(card.locator(".args")).to_have_text(PWN)
    expect(page.locator("#conversations li").first).to_contain_text(f"{PWN} first prompt")
    expect(page.locator("#conv-title")).to_contain_text("<img src=x")
    expect(page.locator("body img, body script, [onmouseover], [onerror]")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None


def test_a_call_id_reused_in_a_later_turn_keeps_both_cards_and_results(service: Service, alice: Tab) -> None:
    """Some models number their calls per turn ("call_0" every time): the first turn's card and
    result were removed from the page when the second turn's card was drawn."""

    def turn(n: int) -> list[dict[str, Any]]:
        call = {"type": "tool-call", "id": "call_0", "name": "lookup", "arguments": f'{{"q": {n}}}'}
        result = {
            "type": "tool-result",
            "callId": "call_0",
            "name": "lookup",
            "content": [{"type": "text", "text": f"result {n}"}],
        }
        return [
            {"role": "user", "parts": [{"type": "text", "text": f"question {n}"}]},
            {"role": "assistant", "parts": [call]},
            {"role": "tool", "parts": [result]},
            {"role": "assistant", "parts": [{"type": "text", "text": f"answer {n}"}]},
        ]

    cid = imported(service, "alice", turn(1) + turn(2))
    page = alice.page
    page.goto(f"{service.url}/#c/{cid}")
    expect(stored_answers(alice).last).to_contain_text("answer 2")
    cards = page.locator(".tool-card")
    expect(cards).to_have_count(2)
    expect(cards.nth(0).locator(".result-text")).to_have_text("result 1")
    expect(cards.nth(1).locator(".result-text")).to_have_text("result 2")
    expect(cards.nth(0).locator(".args")).to_contain_text('"q": 1')


def test_long_unbroken_text_wraps_on_a_phone_and_keeps_a_cards_status_in_sight(
    service: Service, open_tab: Callable[..., Tab]
) -> None:
    """A 3,000-character tool name pushed the card's status ("no real result") out of the
    screen, and a long media URL made the conversation scroll sideways."""
    long = "x" * 3000
    history = [
        {
            "role": "user",
            "parts": [{"type": "text", "text": long}, {"type": "image", "url": f"https://e.example/{long}"}],
        },
        {
            "role": "assistant",
            "parts": [{"type": "tool-call", "id": f"c{long}", "name": f"n{long}", "arguments": long}],
        },
        {"role": "user", "parts": [{"type": "text", "text": "next"}]},
    ]
    cid = imported(service, "alice", history)
    tab = open_tab(service.url, viewport=(390, 844))
    sign_in(tab, service.tokens["alice"])
    page = tab.page
    page.goto(f"{service.url}/#c/{cid}")
    status = page.locator(".tool-card .tool-status")
    expect(status).to_have_text("no real result")
    status.scroll_into_view_if_needed()
    shot(tab, "16-phone-long-text")
    expect(status).to_be_in_viewport(ratio=1)
    assert page.evaluate(
        "(() => { const m = document.getElementById('messages'); return m.scrollWidth <= m.clientWidth; })()"
    )
    shot(tab, "16-phone-long-text")


def test_pathological_markdown_renders_instead_of_freezing_the_page(service: Service, alice: Tab) -> None:
    cid = imported(service, "alice", assistant_says(PATHOLOGICAL))
    page = alice.page
    page.goto(f"{service.url}/#c/{cid}")
    answer = stored_answers(alice).last
    expect(answer).to_contain_text("the end of a long answer")
    expect(answer.locator("a")).to_have_count(0)
    assert "`" * 1000 in (answer.text_content() or "")  # an unmatched run of backticks is text


def test_crafted_links_neither_sign_out_nor_reach_another_path(service: Service, alice: Tab) -> None:
    page = alice.page
    alice.allow.append(re.compile(r"status of 404"))
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    for link in ("#c/..", "#c/."):
        page.goto(f"{service.url}/{link}")
        expect(page.locator("#messages")).to_contain_text("does not exist")
    # "/v1/conversations/.." would resolve to "/v1/runs", "/v1/conversations/." to "/v1/conversations/runs"
    paths = [url.removeprefix(service.url).split("?", 1)[0] for url in urls]
    assert not [p for p in paths if p in ("/v1/runs", "/v1/conversations/runs", "/v1/", "/v1/conversations/")]
    page.goto(f"{service.url}/#c/%E0%A4%A")  # not valid percent-encoding
    page.reload()
    expect(page.locator("#messages")).to_contain_text("does not exist")
    expect(page.locator("#app")).to_be_visible()  # still signed in
    assert page.evaluate("sessionStorage.getItem('tether.token')") == service.tokens["alice"]
    assert page.evaluate("localStorage.length") == 0
    assert not [url for url in urls if service.tokens["alice"] in url]  # never in a URL


def test_a_service_failing_at_load_keeps_the_token_and_signs_in_when_it_answers(
    service: Service, alice: Tab
) -> None:
    """The first request of a loaded page fails (the service's store is down: 503; then the
    network: refused). The tab's token is a good one: it is kept, and the page gets in by itself
    once the service answers (it used to drop the token on any failure)."""
    page = alice.page
    alice.allow.append(re.compile(r"status of 503|net::ERR_CONNECTION_REFUSED|Failed to fetch"))
    attempts: list[str] = []

    def failing(route: Any) -> None:
        attempts.append(route.request.url)
        if len(attempts) == 1:
            route.fulfill(status=503, content_type="application/json", body=STORE_DOWN)
        else:
            route.abort("connectionrefused")

    page.route("**/v1/me", failing)
    page.reload()
    error = page.locator("#signin-error")
    expect(error).to_contain_text("the conversation store failed")
    expect(error).to_contain_text("cannot be reached")  # the second attempt, by itself
    expect(error).to_contain_text("Trying again")
    assert page.evaluate("sessionStorage.getItem('tether.token')") == service.tokens["alice"]
    shot(alice, "15-service-failing-at-load")
    page.unroute("**/v1/me")
    expect(page.locator("#app")).to_be_visible()
    chat(alice, "still signed in", "word12")


STORE_DOWN = '{"error": {"type": "unavailable", "message": "the conversation store failed; try again"}}'
