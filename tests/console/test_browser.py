"""The console in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

Each test does what an operator does, with clicks, and checks the result in the store, not
only on the page. Every page visited is saved as a screenshot under test-artifacts/console/
(or $CONTEXTPLANE_TEST_ARTIFACTS/console/). The page fixture records every dialog and page
error; every test ends by asserting there were none, and that the page asked for nothing
outside the console (no CDN: it must work offline).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from contextplane_demo.fixtures import SESSION
from tests.console.conftest import Console, Deployment, screenshot
from tests.console.test_api import find


@pytest.fixture
def offline(page: Any, console: Console) -> Iterator[list[str]]:
    """Refuse (and remember) every request that is not to the console itself."""
    outside: list[str] = []

    def gate(route: Any) -> None:
        if route.request.url.startswith(console.url + "/"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.context.route("**/*", gate)
    yield outside
    assert outside == [], f"the console asked for something outside itself: {outside}"


def clean(page: Any) -> None:
    assert page.dialogs == [] and page.errors == [], (page.dialogs, page.errors)


def test_confirm_and_reject_pending_memories_one_by_one_and_in_bulk(
    page: Any, console: Console, deployment: Deployment, offline: list[str]
) -> None:
    store = deployment.store
    first = find(deployment, "Runbook excerpt")
    second = find(deployment, "Vendor doc: the CDN purge")
    third = find(deployment, "Deploys that skip the canary")
    fourth = find(deployment, "Replica lag spikes")
    assert {c.review_state for c in (first, second, third, fourth)} == {"pending"}

    page.goto(f"{console.url}/memory")
    rows = page.locator("table.memories tbody tr")
    assert rows.first.get_attribute("data-review") == "pending"  # pending first
    screenshot(page, "memory-review")

    page.locator(f"#row-{first.id} button[data-action=confirmed]").click()
    page.wait_for_selector(f"#row-{first.id}[data-review=confirmed]")
    assert store.get(first.id).review_state == "confirmed"

    page.locator(f"#row-{second.id} button[data-action=rejected]").click()
    page.wait_for_selector(f"#row-{second.id}[data-review=rejected]")
    assert store.get(second.id).review_state == "rejected"

    page.check(f"#row-{third.id} input[name=ids]")
    page.check(f"#row-{fourth.id} input[name=ids]")
    page.click("#bulk-confirm")
    page.wait_for_selector(".flash")
    assert "Confirmed 2" in page.inner_text(".flash")
    assert store.get(third.id).review_state == "confirmed"
    assert store.get(fourth.id).review_state == "confirmed"
    assert store.get(first.id).review_state == "confirmed" and store.get(second.id).review_state == "rejected"
    screenshot(page, "memory-review-after-bulk")

    page.select_option("select[name=review_state]", "rejected")
    page.wait_for_function(
        "() => { const rows = [...document.querySelectorAll('table.memories tbody tr[data-id]')];"
        " return rows.length > 0 && rows.every(r => r.dataset.review === 'rejected'); }"
    )
    shown = page.locator("table.memories tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)")
    assert set(shown) == {c.id for c in store.list_chunks(review_state="rejected")}
    assert "review_state=rejected" in page.url  # the filter is in the address, so it can be shared
    clean(page)


def test_supersede_a_memory_and_see_the_chain(
    page: Any, console: Console, deployment: Deployment, offline: list[str]
) -> None:
    row = find(deployment, "Deploys that skip the canary")
    page.goto(f"{console.url}/memory/{row.id}")
    assert page.inner_text("#chain").startswith("Not superseded")
    screenshot(page, "memory-detail")
    page.fill("#supersede-content", "Deploys that skip the canary caused three incidents in Q3.")
    page.click("#supersede-form button[type=submit]")
    page.wait_for_selector("ol#chain")
    new_id = store_successor = deployment.store.get(row.id).superseded_by
    assert store_successor is not None
    assert deployment.store.get(new_id).content == "Deploys that skip the canary caused three incidents in Q3."
    links = page.locator("ol#chain li").evaluate_all("items => items.map(i => i.dataset.id)")
    assert links == [row.id, new_id]
    assert page.get_attribute("#memory-panel", "data-lifecycle") == "superseded"
    assert "superseded by " + new_id in page.inner_text(".flash")
    screenshot(page, "memory-chain")
    # the old row's history: created, then superseded by the new row (by the operator write)
    events = page.locator("#history tbody tr").evaluate_all("rows => rows.map(r => r.dataset.event)")
    assert events == ["created", "superseded"]
    assert f"superseded by {new_id}" in page.inner_text("#history tr[data-event=superseded]")
    page.click(f"ol#chain li[data-id='{new_id}'] a")
    page.wait_for_url(f"**/memory/{new_id}")
    assert page.get_attribute("#memory-panel", "data-review") == "confirmed"  # an operator's row
    # ... and the chain read backwards from the new row: it replaced the old one
    earlier = page.locator("ol#supersedes li").evaluate_all("items => items.map(i => i.dataset.id)")
    assert earlier == [row.id]
    assert f"replaced by {new_id}" in page.inner_text(f"ol#supersedes li[data-id='{row.id}']")
    assert page.inner_text("#chain").startswith("Not superseded")
    assert f"supersedes {row.id}" in page.inner_text("#history tr[data-event=created]")
    screenshot(page, "memory-chain-backward")
    page.fill("#expiry-form input[name=expires_at]", "2020-01-01T00:00:00Z")
    page.click("#expiry-form button:not([name])")
    page.wait_for_selector("#memory-panel[data-lifecycle=expired]")
    assert deployment.store.get(new_id).is_expired()
    assert page.inner_text("#history tr[data-event=expiry] td.by") == "console"
    assert deployment.store.history(new_id)[-1].actor == "console"
    page.fill("#expiry-form input[name=expires_at]", "next week")
    page.click("#expiry-form button:not([name])")
    page.wait_for_selector("#memory-panel .error")
    assert "expires_at: 'next week' is not an ISO-8601 timestamp" in page.inner_text("#memory-panel .error")
    clean(page)


def test_the_history_panel_records_who_reviewed(
    page: Any, console: Console, deployment: Deployment, offline: list[str]
) -> None:
    row = find(deployment, "Runbook excerpt")
    page.goto(f"{console.url}/memory/{row.id}")
    assert page.locator("#history tbody tr").count() == 1
    assert page.inner_text("#history tr[data-event=created] td.by") == row.source_type
    page.click("#review-actions button[data-action=confirmed]")
    page.wait_for_selector("#memory-panel[data-review=confirmed]")
    page.click("#review-actions button[data-action=rejected]")
    page.wait_for_selector("#memory-panel[data-review=rejected]")
    reviews = page.locator("#history tr[data-event=review]")
    assert reviews.count() == 2
    assert reviews.locator("td.by").all_inner_texts() == ["console", "console"]
    assert "review state set to rejected" in reviews.nth(1).inner_text()
    assert [(e.event, e.actor, e.review_state) for e in deployment.store.history(row.id)[1:]] == [
        ("review", "console", "confirmed"),
        ("review", "console", "rejected"),
    ]
    screenshot(page, "memory-history")
    clean(page)


def test_run_an_explain_and_read_the_verdict(
    page: Any, console: Console, deployment: Deployment, offline: list[str]
) -> None:
    from contextplane.explain import explain

    old = find(deployment, "The database migration tool is Flyway")
    new = find(deployment, "The database migration tool is Alembic")
    # from the memory row: the explain form, with the recent recorded turns to pick from
    page.goto(f"{console.url}/memory/{old.id}")
    page.click("#explain a.explain-link")
    page.wait_for_url(f"**/explain?memory={old.id}")
    assert page.input_value("#explain-turn-form input[name=memory]") == old.id
    page.click(f"#recent-turns a[href*='session={SESSION}&turn=1']")
    page.wait_for_selector("#explain-result[data-verdict]")
    assert page.inner_text("#verdict") == "filtered" and page.inner_text("#verdict-reason") == "(superseded)"
    assert page.inner_text("#verdict-summary") == f"memory {old.id} was filtered: it was superseded by #{new.id}"
    assert page.inner_text("#verdict-evidence dd[data-key=by]") == "operator"
    screenshot(page, "explain-filtered")
    page.click("#superseding a.memory-id")
    page.wait_for_url(f"**/memory/{new.id}")

    # from the inspector: a delivered memory id's explain link, for that turn
    always = find(deployment, "The website deploy window is Tuesday")
    page.goto(f"{console.url}/call?session={SESSION}&turn=1&call=0")
    page.click(f"#projected-sections tr[data-section=always_on] a.explain-link[data-id='{always.id}']")
    page.wait_for_selector("#explain-result[data-verdict]")
    assert page.inner_text("#verdict") == "delivered"
    assert page.inner_text("#verdict-evidence dd[data-key=section]") == "always_on"
    assert page.inner_text("#verdict-evidence dd[data-key=position]") == "1"
    assert page.inner_text("#verdict-evidence dd[data-key=chars]") == "145"
    screenshot(page, "explain-delivered")

    # the form, by hand: a recorded turn where it was shed, then a query it is never retrieved for
    priya = find(deployment, "Priya Raman approves")
    page.fill("#explain-turn-form input[name=memory]", priya.id)
    page.fill("#explain-turn-form input[name=session]", SESSION)
    page.fill("#explain-turn-form input[name=turn]", "5")
    page.click("#explain-turn-form button[type=submit]")
    page.wait_for_selector("#explain-result[data-verdict=shed]")
    assert page.inner_text("#verdict-evidence dd[data-key=budget_chars]") == "16000"
    assert page.inner_text("#verdict-evidence table[data-key=shed_steps] td[data-key=action]") == "drop_row"
    screenshot(page, "explain-shed")

    vendor = find(deployment, "Vendor doc: the CDN purge")
    page.fill("#explain-query-form input[name=memory]", vendor.id)
    page.fill("#explain-query", "Which database migration tool did we settle on?")
    page.click("#explain-query-form button[type=submit]")
    page.wait_for_selector("#explain-result[data-verdict=never_retrieved]")
    legs = page.locator("#verdict-evidence table[data-key=legs] tbody tr")
    assert legs.count() == 1 and legs.locator("td[data-key=leg]").inner_text() == "fts"
    assert legs.locator("td[data-key=note]").inner_text() == "no word of the query occurs in it"
    assert page.inner_text("#verdict-evidence dd[data-key=k]") == "8"
    core = explain(vendor.id, backend=deployment.backend, host=deployment.host,
                   query="Which database migration tool did we settle on?")
    assert page.inner_text("#verdict-summary") == core.summary  # the core's verdict, not the console's
    picks = page.locator("#recent-turns a.explain-link").evaluate_all("links => links.map(a => a.dataset.id)")
    assert picks and set(picks) == {vendor.id}  # the turns to try next are for this memory
    screenshot(page, "explain-never-retrieved")

    # evidence whose keys the console was not written for (the relevance gate) still shows: a
    # question mostly about what the store never heard of, whose one known word finds the runbook
    runbook = find(deployment, "Runbook excerpt")
    page.fill("#explain-query-form input[name=memory]", runbook.id)
    page.fill("#explain-query", "runbook volcano earthquake tsunami glacier")
    page.fill("#explain-query-form input[name=project]", "website")
    page.click("#explain-query-form button[type=submit]")
    page.wait_for_selector("#explain-result[data-reason=below_min_relevance]")
    assert page.inner_text("#verdict-reason") == "(below min relevance)"
    assert page.inner_text("#verdict-evidence dd[data-key=min_relevance]") == "0.3"
    assert float(page.inner_text("#verdict-evidence dd[data-key=relevance]")) < 0.3
    screenshot(page, "explain-below-relevance")

    # a turn that was never recorded: the refusal, in place
    page.fill("#explain-turn-form input[name=memory]", vendor.id)
    page.fill("#explain-turn-form input[name=turn]", "9")
    page.click("#explain-turn-form button[type=submit]")
    page.wait_for_selector("#explain-result .error")
    assert "recorded turns of this session: 1, 2, 4, 5, 6" in page.inner_text("#explain-result .error")
    clean(page)


def test_open_a_recorded_turn_and_read_its_sections_and_shed_steps(
    page: Any, console: Console, deployment: Deployment, offline: list[str]
) -> None:
    page.goto(f"{console.url}/sessions")
    screenshot(page, "sessions")
    page.click(f"text={SESSION}")
    page.wait_for_selector("#calls")
    assert page.locator("#calls tbody tr").count() == 6
    assert page.locator("#injections tbody tr").count() == 5
    screenshot(page, "session")
    page.click("#calls a >> text=turn 5")
    page.wait_for_selector("#budget-table")
    prefix = page.locator("#prefix-sections tbody tr td:first-child").all_inner_texts()
    assert prefix[:2] == ["identity", "operating_model"]
    page.click("details.prefix-text[data-section=identity] summary")
    assert "Ferris" in page.inner_text("details.prefix-text[data-section=identity] pre")
    steps = page.locator("#shed-steps li").evaluate_all("items => items.map(i => [i.dataset.section, i.dataset.action])")
    assert [s for s, _ in steps][:2] == ["retrieved", "prior_sessions"]
    assert "drop row" in page.inner_text("#shed-steps li:first-child")
    assert page.inner_text("#budget-table tr[data-section=retrieved] td:last-child") == "shed"
    assert "v1-frame-1" in page.inner_text("#stripped")
    assert "<injected_memory>" in page.inner_text("#projection-text")
    screenshot(page, "inspector-turn")
    always = find(deployment, "The website deploy window is Tuesday")
    page.click(f"#projected-sections tr[data-section=always_on] a.memory-id >> text='{always.id}'")
    page.wait_for_url(f"**/memory/{always.id}")
    assert "Tuesday 14:00-16:00 UTC" in page.inner_text("#memory-content")

    page.goto(f"{console.url}/call?session={SESSION}&turn=3&call=0")
    assert page.inner_text("#incognito") == "incognito: nothing recorded"
    assert page.locator("#projection-text").count() == 0 and page.locator("#prefix-sections").count() == 0
    screenshot(page, "inspector-incognito")
    clean(page)


def test_run_a_preview_with_the_turns_options(
    page: Any, console: Console, deployment: Deployment, offline: list[str]
) -> None:
    logged = len(deployment.backend.injections.rows())
    page.goto(f"{console.url}/preview")
    page.fill("#preview-query", "When is the website deploy window?")
    page.fill("input[name=context_window]", "16000")
    page.click("#preview-form button[type=submit]")
    page.wait_for_selector("#budget-summary")
    summary = page.inner_text("#budget-summary")
    assert "of 16000 chars: within budget" in summary
    assert page.get_attribute("#budget-summary", "data-within") == "true"
    assert page.locator("#budget-table tbody tr").count() == 5
    assert page.locator("#shed-steps li").first.get_attribute("data-section") == "retrieved"
    screenshot(page, "preview")
    page.check("input[name=incognito]")
    page.click("#preview-form button[type=submit]")
    page.wait_for_selector("#budget-table tr[data-section=always_on] >> text=suppressed (incognito)")
    assert "mode incognito" in page.inner_text("#budget-summary")
    page.fill("#preview-query", "")
    page.click("#preview-form button[type=submit]")  # the browser refuses an empty query itself
    assert page.evaluate("document.querySelector('#preview-query').validity.valueMissing") is True
    assert len(deployment.backend.injections.rows()) == logged  # a preview records nothing
    clean(page)


HOSTILE = {
    "script": "Note <script>window.__pwned = 'script'; alert('script')</script> end",
    "img": 'Logo <img src=x onerror="window.__pwned=\'img\'; alert(\'img\')"> end',
    "link": "See [the runbook](javascript:alert('md-link')) and <a href=\"javascript:alert('a')\">this</a>",
    "attr": "\"><svg onload=alert('svg')> and ' onmouseover=alert('attr') x='",
}


def test_hostile_memory_text_renders_inert(
    page: Any, console: Console, deployment: Deployment, offline: list[str]
) -> None:
    ids = {
        name: deployment.store.add_chunk(text, "general", "conversation", namespace="project:website")
        for name, text in HOSTILE.items()
    }
    # the explain view shows the query in its summary and evidence: hostile queries, too
    explains = [
        "/explain?" + urlencode({"memory": ids[name], "query": text, "project": "website"})
        for name, text in HOSTILE.items()
    ]
    for where in ("/memory", "/memory?q=runbook", *(f"/memory/{i}" for i in ids.values()), *explains):
        page.goto(console.url + where)
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.__pwned") is None, where
        assert page.locator("main img, main svg, main script").count() == 0, where
        assert page.locator("a[href^='javascript:' i]").count() == 0, where
        assert page.locator("[onerror], [onload], [onmouseover]").count() == 0, where
        if where.startswith("/explain"):
            assert page.locator("#explain-result[data-verdict]").count() == 1, where
            assert page.inner_text("#verdict-turn q") in HOSTILE.values()  # shown as text
    page.goto(f"{console.url}/memory/{ids['script']}")
    assert page.inner_text("#memory-content") == HOSTILE["script"]  # shown as text, exactly
    page.goto(f"{console.url}/memory")
    page.hover(f"#row-{ids['attr']} td.content")
    screenshot(page, "hostile-memory")
    # the preview renders the same rows inside the projection text
    page.goto(f"{console.url}/preview")
    page.fill("#preview-query", "runbook note logo this")
    page.click("#preview-form button[type=submit]")
    page.wait_for_selector("#preview-text")
    assert "window.__pwned = 'script'" in page.inner_text("#preview-text")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#preview-result img, #preview-result svg").count() == 0
    clean(page)


def test_the_inertness_check_can_fail(page: Any) -> None:
    """The same assertions catch the payloads when they are rendered unescaped (so the test
    above would fail if the console stopped escaping)."""
    page.set_content("<main>" + HOSTILE["script"] + HOSTILE["img"] + "</main>")
    page.wait_for_timeout(200)
    assert page.evaluate("window.__pwned") in {"script", "img"}
    assert page.dialogs
