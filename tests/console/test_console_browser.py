"""The console in a real browser: Debian's chromium, driven by Playwright, against a real keyed
server (tests/console/conftest.py). Skipped, saying so, when chromium is not installed.

With ``SYNAPSEDB_CONSOLE_SCREENSHOTS=1`` each view is saved to docs/img/console-<view>.png."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.console.conftest import CHROMIUM, NS, ConsoleEnv

if not CHROMIUM.exists():
    pytest.skip(
        f"chromium is not installed at {CHROMIUM} (Debian: apt install chromium): the console's "
        "browser tests need it",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect, sync_playwright

IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
SHOTS = os.environ.get("SYNAPSEDB_CONSOLE_SCREENSHOTS") == "1"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context per test. Any script error or Content-Security-Policy violation
    fails the test (a failed request is not an error: the console shows those itself)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    problems: list[str] = []
    p.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    p.on(
        "console",
        lambda msg: (
            problems.append(f"console {msg.type}: {msg.text}")
            if msg.type == "error" and "Failed to load resource" not in msg.text
            else None
        ),
    )
    yield p
    context.close()
    assert not problems, problems


def shot(page: Page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(IMG / f"console-{name}.png"), full_page=True)


def sign_in(page: Page, env: ConsoleEnv, who: str = "admin", hash_: str = "#/") -> None:
    page.goto(f"{env.url}/ui{hash_}")
    page.fill("#api-key", env.tokens[who])
    page.click("form.login button[type=submit]")
    expect(page.locator("#who")).to_contain_text("acme")


def view(page: Page, env: ConsoleEnv, hash_: str) -> None:
    page.goto(f"{env.url}/ui{hash_}")
    expect(page.locator("#who")).to_contain_text("acme")


def test_browse_namespaces_entities_and_versions(page: Page, console_env: ConsoleEnv) -> None:
    env = console_env
    sign_in(page, env)
    row = page.locator("table.grid tbody tr", has_text=NS)
    expect(row).to_contain_text("64")  # memories: 4 of user:4321, 60 customers
    expect(row).to_contain_text("policy evict")
    shot(page, "namespaces")
    page.click(f"text={NS}")
    expect(page.locator("h1")).to_have_text(NS)
    entities = page.locator("section[aria-labelledby=entities-title]")
    expect(entities.locator(".pager")).to_contain_text("1\u201350")
    entities.get_by_role("button", name="More →").click()
    expect(entities.locator(".pager")).to_contain_text("51\u201361")
    expect(entities.get_by_role("button", name="More →")).to_be_disabled()
    shot(page, "namespace")
    entities.get_by_label("Find entities by prefix").fill("user:43")
    expect(entities.get_by_role("link")).to_have_count(1)
    entities.get_by_role("link", name="user:4321").click()
    expect(page.locator(".memories")).to_contain_text("was delivered on 10/28")
    expect(page.locator(".facts")).to_contain_text('plan = "pro"')
    expect(page.locator(".events")).to_contain_text("opened ticket 77")
    shot(page, "entity")
    item = page.locator(".memories .item", has_text="delivered on 10/28")
    item.get_by_role("link", name="history").click()
    expect(page.locator("ol.versions > li")).to_have_count(2)
    newest = page.locator("ol.versions > li").first
    expect(newest).to_contain_text("v2 · updated by resolution")
    expect(newest.locator("ins")).to_have_text(["was", "delivered on 10/28"])
    expect(newest.locator("del")).to_have_text(["is", "pending"])
    expect(page.locator("ol.versions > li").last).to_contain_text("v1 · written by intake")
    shot(page, "history")
    # the key is in this tab's session storage, never in the address
    assert env.tokens["admin"] not in page.url
    stored = page.evaluate("sessionStorage.getItem('synapsedb.console.key')")
    assert stored == env.tokens["admin"]


def test_time_slider_rerenders_as_of_and_is_shareable(
    page: Page, console_env: ConsoleEnv, browser: Browser
) -> None:
    env = console_env
    sign_in(page, env, hash_=f"#/entity?ns={NS}&entity=user:4321")
    expect(page.locator(".memories")).to_contain_text("was delivered on 10/28")
    before = datetime.fromtimestamp(env.seeded["before"], UTC).astimezone()  # local time
    page.fill(
        "#time-input", before.strftime("%Y-%m-%dT%H:%M:%S.") + f"{before.microsecond // 1000:03d}"
    )
    page.dispatch_event("#time-input", "change")
    expect(page.locator(".banner")).to_contain_text("as the agents knew it")
    expect(page.locator(".memories")).to_contain_text("is pending")
    expect(page.locator(".memories")).not_to_contain_text("delivered")
    expect(page.get_by_role("button", name="Correct")).to_have_count(0)  # no edits of the past
    assert "as_of=" in page.url
    shot(page, "time-travel")
    # every view follows the moment: the audit ends there, the memory's history too
    page.click("#tabs >> text=Audit")
    audit = page.locator("table.audit tbody")
    expect(audit).to_contain_text("ans-771")  # answered before the moment
    expect(audit).not_to_contain_text("update")  # corrected after it
    # the address is the whole state: a new tab (signed in afresh) sees the same past
    shared = page.url.replace("#/audit", "#/entity") + "&entity=user%3A4321"
    other = browser.new_context().new_page()
    try:
        other.goto(shared)
        other.fill("#api-key", env.tokens["reader"])
        other.click("form.login button[type=submit]")
        expect(other.locator(".memories")).to_contain_text("is pending")
        expect(other.locator(".memories")).not_to_contain_text("delivered")
    finally:
        other.context.close()
    page.click("#time-now")
    expect(page.locator(".banner")).to_have_count(0)
    assert "as_of=" not in page.url


def test_query_playground_explains_dedups_and_records_an_answer(
    page: Page, console_env: ConsoleEnv
) -> None:
    env = console_env
    sign_in(page, env, hash_=f"#/query?ns={NS}")
    page.fill("#agent-input", "console-user")
    page.dispatch_event("#agent-input", "change")
    page.fill("#q-text", "prefers email over phone")
    page.fill("#q-entity", "user:4321")
    page.select_option("#q-mode", "hybrid")
    page.fill("#q-k", "5")
    page.click("form.query-form button[type=submit]")
    first = page.locator("ol.hits > li").first
    expect(first).to_contain_text("Prefers email over phone calls")
    expect(first.locator("table.explain")).to_contain_text("cosine similarity")
    expect(first.locator("meter")).not_to_have_count(0)
    expect(first.locator("details.dupes summary")).to_contain_text("1 near-duplicate")
    assert "text=prefers" in page.url  # the query is in the address, to share
    shot(page, "query")
    query_id = page.locator("section[aria-label=Results] code").first.inner_text()
    # logged like any other query, by the agent the console acts as
    audit = env.ns("GET", "/audit", params={"agent": "console-user"}).json()
    assert any(e["action"] == "query" and e["target"] == query_id for e in audit)
    first.get_by_label("cite in an answer").check()
    page.fill("#answer-id", "ans-console-1")
    page.fill("#answer-text", "You prefer email.")
    page.click("form.answer button[type=submit]")
    expect(page.locator("h1")).to_have_text("Lineage")
    expect(page.locator("svg.lineage-graph .node.cited")).to_have_count(1)
    lineage = env.ns("GET", "/answers/ans-console-1/lineage").json()
    assert lineage["agent"] == "console-user" and lineage["queries"][0]["query_id"] == query_id


def test_lineage_graph_shows_what_changed_since(page: Page, console_env: ConsoleEnv) -> None:
    env = console_env
    sign_in(page, env, hash_=f"#/lineage?ns={NS}")
    page.get_by_role("link", name="ans-771").click()
    graph = page.locator("svg.lineage-graph")
    expect(graph.locator(".node.query")).to_have_count(1)
    expect(graph.locator(".node.answer")).to_have_count(1)
    changed = graph.locator(".node.memory.changed")
    expect(changed).to_have_count(1)  # the refund memory was corrected after the answer
    expect(changed).to_have_attribute("aria-label", re.compile("changed: now v2"))
    expect(page.locator("table.since tr.changed")).to_contain_text("v1")
    changed.focus()  # keyboard: Tab to a node, Enter to open it
    page.keyboard.press("Enter")
    detail = page.locator(".detail")
    expect(detail).to_contain_text("What the agent saw: Refund for order #1458 is pending")
    expect(detail.locator("ins").last).to_have_text("delivered on 10/28")
    shot(page, "lineage")
    graph.locator(".node.query").click()
    expect(detail).to_contain_text("refund status for order 1458")


def test_live_feed_shows_a_write_as_it_happens(page: Page, console_env: ConsoleEnv) -> None:
    env = console_env
    sign_in(page, env, hash_=f"#/live?ns={NS}")
    expect(page.locator(".feed-state")).to_have_attribute("data-state", "live")
    for agent, content in [
        ("intake", "Asked about a second refund"),
        ("knowledge", "Refund policy allows 30 days"),
    ]:
        r = env.ns(
            "POST",
            "/memories",
            json={"entity": "user:4321", "content": content},
            headers={"X-Agent": agent},
        )
        assert r.status_code == 201
    rows = page.locator("table.live tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("knowledge")  # newest on top
    expect(rows.nth(1)).to_contain_text("intake")
    expect(rows.first).to_contain_text("user:4321")
    expect(page.locator(".feed-state")).to_contain_text("2 changes seen")
    shot(page, "live")


def edit_buttons(page: Page) -> Any:
    return page.locator("main .actions button")


def test_a_read_only_key_sees_no_edit_controls(page: Page, console_env: ConsoleEnv) -> None:
    env = console_env
    sign_in(page, env, who="reader", hash_=f"#/entity?ns={NS}&entity=user:4321")
    expect(page.locator("#who")).to_contain_text("read")
    expect(page.locator(".memories .item").first).to_be_visible()
    expect(page.locator(".facts .item").first).to_be_visible()
    expect(edit_buttons(page)).to_have_count(0)
    view(page, env, f"#/memory?ns={NS}&id={env.seeded['refund']}")
    expect(page.locator("ol.versions > li")).not_to_have_count(0)
    expect(edit_buttons(page)).to_have_count(0)
    view(page, env, f"#/query?ns={NS}&text=refund")
    expect(page.locator("ol.hits > li").first).to_be_visible()
    expect(page.get_by_label("cite in an answer")).to_have_count(0)
    expect(page.locator("form.answer")).to_have_count(0)
    # a key with write but not admin: edits, but no purge
    page.evaluate("sessionStorage.clear()")
    sign_in(page, env, who="writer", hash_=f"#/entity?ns={NS}&entity=user:4321")
    expect(page.get_by_role("button", name="Forget entity")).to_have_count(1)
    expect(page.get_by_role("button", name="Purge entity")).to_have_count(0)
    expect(page.get_by_role("button", name="Correct")).not_to_have_count(0)


def test_edits_correct_pin_and_purge_with_confirmation(page: Page, console_env: ConsoleEnv) -> None:
    env = console_env
    entity = "user:1007"
    sign_in(page, env, hash_=f"#/entity?ns={NS}&entity={entity}")
    item = page.locator(".memories .item").first
    expect(item).to_contain_text("customer 7 bought a kettle")
    item.get_by_role("button", name="Correct").click()
    page.get_by_label("Corrected content (saved as a new version)").fill(
        "customer 7 bought a teapot"
    )
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".memories .item").first).to_contain_text("teapot")
    expect(page.locator(".memories .item").first).to_contain_text("v2")
    page.locator(".memories .item").first.get_by_role("button", name="Pin").click()
    expect(page.locator(".memories .item .badge")).to_have_text("pinned")
    mid = page.locator(".memories .item").first.get_attribute("data-id")
    versions = env.ns("GET", f"/memories/{mid}/history").json()
    assert [v["version"] for v in versions] == [1, 2, 3] and versions[-1]["pinned"] is True
    assert versions[1]["content"] == "customer 7 bought a teapot"
    page.get_by_role("button", name="Purge entity").click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_contain_text("1 memories")
    expect(dialog).to_contain_text("cannot be undone")
    erase = dialog.get_by_role("button", name="Erase")
    expect(erase).to_be_disabled()
    shot(page, "purge")
    dialog.get_by_label(f"Type {entity} to confirm").fill(entity)
    erase.click()
    expect(page.locator("h1")).to_have_text(NS)
    assert entity not in env.ns("GET", "/entities").json()
    assert env.ns("GET", f"/memories/{mid}/history").json()[-1]["erased"] is True


def test_audit_filters_by_agent_and_entity(page: Page, console_env: ConsoleEnv) -> None:
    env = console_env
    sign_in(page, env, hash_=f"#/audit?ns={NS}")
    page.fill("#a-agent", "intake")
    page.fill("#a-entity", "user:4321")
    page.click("form[aria-label='Audit filters'] button[type=submit]")
    rows = page.locator("table.audit tbody tr")
    expect(rows.first).to_contain_text("intake")
    assert "agent=intake" in page.url and "entity=user%3A4321" in page.url
    for text in rows.all_inner_texts():
        assert "intake" in text and "user:4321" in text
    shot(page, "audit")


def test_entities_and_memories_page_from_the_server(page: Page, console_env: ConsoleEnv) -> None:
    """A namespace of 130 entities and an entity of 120 memories: the console asks for one
    page at a time (never the whole list), finds entities by prefix on the server, and walks
    every memory, newest first, with the API's ``before`` cursor, from the keyboard too."""
    env = console_env
    ns = "paging"

    def batch(items: list[dict[str, Any]]) -> None:
        r = env.call("POST", f"/v1/namespaces/{ns}/memories:batch", json={"items": items})
        assert r.status_code == 201, r.text

    batch(
        [{"entity": f"item:{i:03d}", "content": f"item {i}"} for i in range(120)]
        + [{"entity": f"zone:{i}", "content": f"zone {i}"} for i in range(10)]
    )
    batch(
        [
            {"entity": "item:many", "content": f"note {i:03d}", "ts": 1_700_000_000 + i}
            for i in range(120)
        ]
    )
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/entities" in r.url else None)
    sign_in(page, env, hash_=f"#/ns?ns={ns}")
    entities = page.locator("section[aria-labelledby=entities-title]")
    links = entities.get_by_role("link")
    expect(links).to_have_count(50)
    expect(links.first).to_have_text("item:000")
    more = entities.get_by_role("button", name="More →")
    more.click()
    expect(links.first).to_have_text("item:050")
    more.focus()  # the keyboard: Enter turns the page; the focus stays on the pager
    page.keyboard.press("Enter")
    expect(entities.locator(".pager")).to_contain_text("101\u2013131")  # the last page
    expect(links).to_have_count(31)  # item:100-119, item:many, zone:0-9
    expect(links.first).to_have_text("item:100")
    expect(links.last).to_have_text("zone:9")
    expect(more).to_be_disabled()
    page.keyboard.press("Enter")  # More is disabled now: the focus went to Previous
    expect(links.first).to_have_text("item:050")
    box = entities.get_by_label("Find entities by prefix")
    box.fill("zone:")
    box.press("Enter")
    expect(links).to_have_count(10)
    expect(entities.locator(".pager")).to_contain_text("1\u201310")
    box.fill("nothing:")
    expect(entities).to_contain_text("No entity starts with")
    for url in asked:  # one page (and one name more, to know whether more follow) each time
        query = dict(parse_qsl(urlsplit(url).query))
        assert query.get("limit") == "51", url
    assert any("after=item%3A049" in u for u in asked)
    assert any("prefix=zone%3A" in u for u in asked)
    view(page, env, f"#/entity?ns={ns}&entity=item%3Amany")
    memories = page.locator(".memories")
    items = memories.locator(".item .content")
    expect(items).to_have_count(50)
    expect(items.first).to_have_text("note 119")
    seen: list[str] = []
    for start in (119, 69, 19):
        expect(items.first).to_have_text(f"note {start:03d}")
        seen += items.all_inner_texts()
        older = memories.get_by_role("button", name="Older →")
        if start == 19:
            expect(older).to_be_disabled()
        else:
            older.click()
    assert seen == [f"note {i:03d}" for i in range(119, -1, -1)]  # each once, newest first
    memories.get_by_role("button", name="← Newer").click()
    expect(items.first).to_have_text("note 069")


def test_streams_page_from_the_server(page: Page, console_env: ConsoleEnv) -> None:
    """A namespace of 65 streams: the stream list asks for one page at a time as the entity
    picker does (never the whole list), finds streams by prefix on the server, and a name opens
    its stream."""
    env = console_env
    ns = "stream-pages"
    names = [f"chat:{i:03d}" for i in range(60)] + [f"desk:{i}" for i in range(5)]
    for i, name in enumerate(names):
        r = env.call(
            "POST",
            f"/v1/namespaces/{ns}/events",
            json={
                "entity": f"user:{i}",
                "event": f"said {i} in {name}",
                "stream": name,
                "searchable": False,
            },
        )
        assert r.status_code == 201, r.text
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/streams" in r.url else None)
    sign_in(page, env, hash_=f"#/ns?ns={ns}")
    streams = page.locator("section[aria-labelledby=streams-title]")
    links = streams.get_by_role("link")
    expect(links).to_have_count(50)
    expect(links.first).to_have_text("chat:000")
    expect(streams.locator(".pager")).to_contain_text("1\u201350")
    more = streams.get_by_role("button", name="More →")
    more.click()
    expect(streams.locator(".pager")).to_contain_text("51\u201365")
    expect(links).to_have_count(15)
    expect(links.first).to_have_text("chat:050")
    expect(links.last).to_have_text("desk:4")
    expect(more).to_be_disabled()
    streams.get_by_role("button", name="← Previous").click()
    expect(links.first).to_have_text("chat:000")
    box = streams.get_by_label("Find streams by prefix")
    box.fill("desk:")
    box.press("Enter")
    expect(links).to_have_count(5)
    expect(streams.locator(".pager")).to_contain_text("1\u20135")
    box.fill("nothing:")
    expect(streams).to_contain_text("No stream starts with")
    assert asked
    for url in asked:  # one page (and one name more, to know whether more follow) each time
        query = dict(parse_qsl(urlsplit(url).query))
        assert query.get("limit") == "51", url
    assert any("after=chat%3A049" in u for u in asked)
    assert any("prefix=desk%3A" in u for u in asked)
    box.fill("desk:3")
    expect(links).to_have_count(1)
    links.first.click()
    expect(page.locator("h1")).to_have_text("Stream desk:3")
    expect(page.locator("main")).to_contain_text("said 63 in desk:3")
