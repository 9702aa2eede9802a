"""A campaign's page in a real browser (issue 30's proof): a campaign of RECIPIENTS contacts,
made through the public API (contacts, a template submitted for review and approved by
`tern simulator`, the campaign resolved and launched), runs at the number's pace of MPS
messages a second; its page's counts move without the page being reloaded; Pause stops them
(the page says so and the counts stay), Resume starts them again and the campaign completes.
Screenshots at 1280 and 375 px in /tmp (and docs/app with TERN_SCREENSHOTS=1); no sideways
scrolling."""

from __future__ import annotations

import itertools
import json
import pathlib
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from conftest import Server, free_port, screenshot

PASSWORD = "a long enough passphrase 42"
APP_SECRET = "browser-campaigns-app-secret"
PNID = "109000000000088"
WABA = "209000000000088"
TEMPLATE = "spring_sale"
RECIPIENTS = 30
# Tern's pace for the number: slow enough for a person (and the test) to watch and pause.
MPS = 2
_n = itertools.count()


def _call(url: str, key: str, body: dict | None = None, method: str = "POST") -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@pytest.fixture(scope="module")
def network(receiver):
    """A `tern serve` whose network is a `tern simulator` (which approves templates submitted
    to it), an organisation with the simulator's number at MPS messages a second, and an owner's
    full-access key with template TEMPLATE approved: (server, organisation id, key)."""
    with tempfile.TemporaryDirectory(prefix="tern-browser-campaigns-") as tmp:
        s = Server(pathlib.Path(tmp), receiver.ca_file)
        sim_port = free_port()
        sim = f"http://127.0.0.1:{sim_port}"
        s.env.update(
            {"TERN_GRAPH_URL": sim, "TERN_APP_SECRET": APP_SECRET, "TERN_VERIFY_TOKEN": "verify"}
        )
        log = open(pathlib.Path(tmp) / "simulator.log", "wb")
        proc = subprocess.Popen(
            [s.bin, "simulator", "--listen", f"127.0.0.1:{sim_port}",
             "--callback-url", f"{s.base_url}/webhooks/whatsapp", "--app-secret", APP_SECRET,
             "--seed", "1", "--number", f"{PNID}:+14155550188:{WABA}:token:80",
             "--sent-delay-ms", "200", "--delivered-delay-ms", "500", "--read-delay-ms", "1500"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            s.start()
            org = s.admin("org", "create", "--name", "Campaigner", "--plan", "growth")["id"]
            s.admin("number", "add", "--org", org, "--phone-number-id", PNID,
                    "--display-phone-number", "+14155550188", "--waba-id", WABA,
                    "--access-token", "token", "--throughput-mps", str(MPS))
            owner = s.admin("member", "add", "--org", org, "--email", "keys@campaigns.test",
                            "--role", "owner")
            key = s.admin("key", "create", "--org", org, "--member", owner["id"], "--name",
                          "campaigns", "--preset", "full_access")["key"]
            api = f"{s.base_url}/api/public/v1"
            status, t = _call(f"{api}/templates", key, {
                "name": TEMPLATE, "language": "en_US", "category": "marketing",
                "components": [{"type": "BODY", "text": "Hello {{1}}, the spring sale is on!",
                                "example": {"body_text": [["Ada"]]}}]})
            assert status == 201, t
            status, t = _call(f"{api}/templates/{t['id']}/submit", key)
            assert status == 200, t
            # The simulator approves it a moment later and tells Tern by webhook.
            deadline = time.monotonic() + 20
            while t.get("status") != "approved" and time.monotonic() < deadline:
                time.sleep(0.2)
                _, t = _call(f"{api}/templates/{t['id']}", key, method="GET")
            assert t.get("status") == "approved", t
            yield s, org, key
        finally:
            s.stop()
            proc.terminate()
            proc.wait(timeout=10)
            log.close()


def no_sideways_scrolling(page, width):
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{page.url}: {scroll}px wide at {width}"


def done(page) -> int:
    return int(page.locator("#campaign-done").get_attribute("data-done"))


def wait_done_beyond(page, n: int, timeout_ms: int = 20000) -> None:
    """Until the page shows more than ``n`` recipients handled (by itself: no reload here)."""
    page.locator(f'#campaign-done:not([data-done="{n}"])').wait_for(timeout=timeout_ms)
    assert done(page) > n


def mark_not_reloaded(page) -> None:
    # A marker the page keeps only if it is never reloaded.
    page.evaluate("() => { window.__ternNotReloaded = true; }")


def not_reloaded(page) -> bool:
    return page.evaluate("() => window.__ternNotReloaded === true")


def test_progress_moves_then_pause_and_resume(page, network, viewport_width):
    server, org, key = network
    n = next(_n)
    api = f"{server.base_url}/api/public/v1"
    tag = f"spring{n}"
    for i in range(RECIPIENTS):
        status, c = _call(f"{api}/contacts", key, {
            "phone": f"+1415556{n}{i:03d}", "name": f"Customer {i}", "tags": [tag]})
        assert status in (200, 201), c
    status, c = _call(f"{api}/campaigns", key, {
        "name": f"Spring sale {viewport_width}",
        "template": {"name": TEMPLATE, "language": "en_US",
                     "variables": [{"field": "name", "fallback": "there"}]},
        "audience": {"tags": [tag]}})
    assert status == 201, c
    cid = c["id"]
    status, r = _call(f"{api}/campaigns/{cid}/resolve", key)
    assert status == 200 and r["recipient_count"] == RECIPIENTS, r

    member = server.admin("member", "add", "--org", org, "--email",
                          f"campaigner{n}@browser.test", "--role", "admin")
    page.goto(member["invite_url"])
    page.get_by_label("Your name").fill("Katherine Johnson")
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Create account and sign in").click()

    status, r = _call(f"{api}/campaigns/{cid}/launch", key)
    assert status in (200, 202), r
    page.goto(f"{server.base_url}/app/campaigns/{cid}")
    assert page.locator("#campaign-status").get_attribute("data-status") == "running"
    assert page.locator("#campaign-live").get_attribute("data-final") == "false"
    assert page.locator("[data-live-refresh]").is_hidden()
    mark_not_reloaded(page)

    # The counts move by themselves.
    first = done(page)
    wait_done_beyond(page, first)
    moved = done(page)
    assert not_reloaded(page), "the page was reloaded"
    assert moved < RECIPIENTS, "the campaign ended before it could be paused"
    sent = int(page.locator('dd[data-count="sent"]').inner_text()) + int(
        page.locator('dd[data-count="delivered"]').inner_text()) + int(
        page.locator('dd[data-count="read"]').inner_text())
    assert sent == moved, "every recipient handled so far was messaged"
    no_sideways_scrolling(page, viewport_width)
    page.screenshot(path=f"/tmp/h6-campaign-running-{viewport_width}.png", full_page=True)
    screenshot(page, f"campaign-{viewport_width}")

    # Pause: the page says so, and the counts stay where they are.
    with page.expect_navigation():
        page.get_by_role("button", name="Pause").click()
    assert "paused" in page.locator(".flash-success").inner_text()
    status_el = page.locator("#campaign-status")
    assert status_el.get_attribute("data-status") == "paused"
    assert "paused by a person" in page.locator('[data-live-part="progress"]').inner_text()
    assert page.get_by_role("button", name="Resume").is_visible()
    assert page.get_by_role("button", name="Pause").count() == 0
    # A message the dispatcher already held when the pause came may still go: settle first.
    time.sleep(1.5)
    page.reload()
    held = done(page)
    time.sleep(3 / MPS * 2)  # long enough for several more sends at the number's pace
    page.reload()
    assert done(page) == held, "a paused campaign kept sending"
    assert held < RECIPIENTS
    assert page.locator("#campaign-status").get_attribute("data-status") == "paused"
    no_sideways_scrolling(page, viewport_width)
    page.screenshot(path=f"/tmp/h6-campaign-paused-{viewport_width}.png", full_page=True)

    # Resume: running again, the counts move again by themselves, and it completes.
    with page.expect_navigation():
        page.get_by_role("button", name="Resume").click()
    assert "running again" in page.locator(".flash-success").inner_text()
    assert page.locator("#campaign-status").get_attribute("data-status") == "running"
    mark_not_reloaded(page)
    resumed = done(page)
    assert resumed < RECIPIENTS
    wait_done_beyond(page, resumed)
    timeout = int((RECIPIENTS / MPS + 20) * 1000)
    page.locator('#campaign-status[data-status="completed"]').wait_for(timeout=timeout)
    assert not_reloaded(page), "the page was reloaded"
    assert done(page) == RECIPIENTS
    # Completed, but its last messages are still delivered and read: it refreshes on a while.
    assert page.locator("#campaign-live").get_attribute("data-final") == "false"
    assert page.get_by_role("button", name="Pause").count() == 0
    assert page.get_by_role("button", name="Resume").count() == 0
    no_sideways_scrolling(page, viewport_width)
    page.screenshot(path=f"/tmp/h6-campaign-done-{viewport_width}.png", full_page=True)
