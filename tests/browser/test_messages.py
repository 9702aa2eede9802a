"""The message explorer and a message's page in a real browser (issue 30's proof): a message
sent through the API to `tern simulator` (the network, which reports sent, delivered and then
read a few seconds later) is found by the customer's phone number written another way, its
page opened, and its status moves to ``read`` without the page being reloaded. A failed
delivery of the message's ``message.status`` event (the receiver answers 500) is replayed from
the message page once the receiver recovers. Screenshots at 1280 and 375 px in /tmp (and
docs/app with TERN_SCREENSHOTS=1); no sideways scrolling."""

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
APP_SECRET = "browser-messages-app-secret"
PNID = "109000000000077"
READ_AFTER_MS = 6000
_n = itertools.count()


def _post(url: str, body: dict, key: str | None = None, idem: str | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    if idem:
        req.add_header("Idempotency-Key", idem)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@pytest.fixture(scope="module")
def networked(receiver):
    """A `tern serve` whose network is a `tern simulator` that reads every message
    READ_AFTER_MS after delivering it, and an organisation with its number: (server,
    simulator base URL, organisation id)."""
    with tempfile.TemporaryDirectory(prefix="tern-browser-messages-") as tmp:
        s = Server(pathlib.Path(tmp), receiver.ca_file)
        sim_port = free_port()
        sim = f"http://127.0.0.1:{sim_port}"
        s.env.update(
            {"TERN_GRAPH_URL": sim, "TERN_APP_SECRET": APP_SECRET, "TERN_VERIFY_TOKEN": "verify",
             # A failed webhook delivery is tried again only after an hour: the Replay button
             # is what delivers it within the test.
             "TERN_WEBHOOK_RETRY_SCHEDULE": "3600"}
        )
        log = open(pathlib.Path(tmp) / "simulator.log", "wb")
        proc = subprocess.Popen(
            [s.bin, "simulator", "--listen", f"127.0.0.1:{sim_port}",
             "--callback-url", f"{s.base_url}/webhooks/whatsapp", "--app-secret", APP_SECRET,
             "--seed", "1", "--number", f"{PNID}:+14155550177:209000000000077:token:80",
             "--sent-delay-ms", "200", "--delivered-delay-ms", "500",
             "--read-delay-ms", str(READ_AFTER_MS)],
            stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            s.start()
            # One organisation holds the simulator's number (a number is registered once).
            org = s.admin("org", "create", "--name", "Explorer", "--plan", "growth")["id"]
            s.admin("number", "add", "--org", org, "--phone-number-id", PNID,
                    "--display-phone-number", "+14155550177", "--waba-id", "209000000000077",
                    "--access-token", "token")
            yield s, sim, org
        finally:
            s.stop()
            proc.terminate()
            proc.wait(timeout=10)
            log.close()


def no_sideways_scrolling(page, width):
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{page.url}: {scroll}px wide at {width}"


def _owner_and_key(server, org, name: str) -> tuple[dict, str]:
    """A new owner of ``org`` (invited: ``invite_url``) and a full-access key of theirs."""
    member = server.admin("member", "add", "--org", org, "--email", f"{name}@browser.test",
                          "--role", "owner")
    key = server.admin("key", "create", "--org", org, "--member", member["id"], "--name", name,
                       "--preset", "full_access")["key"]
    return member, key


def _accept_invite(page, member: dict) -> None:
    page.goto(member["invite_url"])
    page.get_by_label("Your name").fill("Grace Hopper")
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Create account and sign in").click()


def _answer_customer(server, sim: str, key: str, customer: str) -> str:
    """The customer writes first (the 24-hour window opens), then the business answers
    through the API: the answer's message id."""
    status, _ = _post(f"{sim}/_sim/inbound", {"phone_number_id": PNID, "from": customer,
                                              "type": "text", "text": {"body": "Where is it?"}})
    assert status in (200, 201, 202)
    deadline = time.monotonic() + 20
    while True:
        status, sent = _post(f"{server.base_url}/api/public/v1/messages",
                             {"to": f"+{customer}", "type": "text",
                              "text": {"body": "It shipped today."}}, key,
                             f"browser-{customer}-{time.monotonic_ns()}")
        if status in (200, 201, 202) or time.monotonic() > deadline:
            break
        time.sleep(0.3)  # the inbound message is still on its way
    assert status in (200, 201, 202), sent
    return sent["id"]


def test_find_by_phone_and_watch_it_become_read(page, networked, viewport_width):
    server, sim, org = networked
    n = next(_n)
    member, key = _owner_and_key(server, org, f"explorer{n}")
    customer = f"1415555{6000 + n:04d}"
    message_id = _answer_customer(server, sim, key, customer)
    _accept_invite(page, member)

    # This test's own server, not the session's (the page's base URL).
    page.goto(f"{server.base_url}/app/messages")
    # The same phone, written as a person would.
    page.get_by_label("Search", exact=True).fill(f"+1 (415) 555-{customer[-4:]}")
    with page.expect_navigation():
        page.get_by_role("button", name="Search").click()
    link = page.locator(f'a[href="/app/messages/{message_id}"]')
    assert link.count() == 1, page.content()
    no_sideways_scrolling(page, viewport_width)
    page.screenshot(path=f"/tmp/h4-explorer-{viewport_width}.png", full_page=True)
    screenshot(page, f"messages-{viewport_width}")
    with page.expect_navigation():
        link.click()
    status_el = page.locator("#message-status")
    assert status_el.get_attribute("data-status") != "read", "read only later"
    # A marker the page keeps only if it is never reloaded.
    page.evaluate("() => { window.__ternNotReloaded = true; }")
    # A locator, not wait_for_function: the app's CSP forbids evaluating strings.
    page.locator('#message-status[data-status="read"]').wait_for(timeout=READ_AFTER_MS + 15000)
    assert page.evaluate("() => window.__ternNotReloaded === true"), "the page was reloaded"
    # Read, but its story goes on for a minute (the read event's deliveries): still live.
    assert page.locator("#message-live").get_attribute("data-final") == "false"
    assert page.locator("#message-status").inner_text().strip() == "Read"
    assert page.locator("[data-live-refresh]").is_hidden()
    no_sideways_scrolling(page, viewport_width)
    page.screenshot(path=f"/tmp/h4-message-{viewport_width}.png", full_page=True)
    screenshot(page, f"message-{viewport_width}")


@pytest.mark.parametrize("viewport_width", [1280])
def test_replay_a_failed_delivery_from_the_message_page(page, networked, receiver, viewport_width):
    server, sim, org = networked
    n = next(_n)
    member, key = _owner_and_key(server, org, f"replay{n}")
    # A receiver of message.status that is down (answers 500).
    path = f"/replay-{n}"
    receiver.fail(path)
    status, sub = _post(f"{server.base_url}/api/public/v1/webhook-subscriptions",
                        {"url": receiver.url(path), "events": ["message.status"]}, key)
    assert status == 201, sub
    customer = f"1415555{7000 + n:04d}"
    message_id = _answer_customer(server, sim, key, customer)
    _accept_invite(page, member)

    page.goto(f"{server.base_url}/app/messages/{message_id}")
    # The message reaches `read` (the page stops following it); its status events' first
    # attempts failed, each with its Replay button on the page.
    page.locator('#message-status[data-status="read"]').wait_for(timeout=READ_AFTER_MS + 15000)
    replay = page.locator("form.replay-form")
    deadline = time.monotonic() + 15
    while replay.count() == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        page.reload()
    assert replay.count() >= 1, page.content()
    failed = page.locator('li[data-kind="webhook_attempt"]', has=replay).first
    assert "HTTP 500" in failed.inner_text(), failed.inner_text()
    event_id = failed.locator('input[name="event_id"]').get_attribute("value")
    page.screenshot(path=f"/tmp/h6-replay-before-{viewport_width}.png", full_page=True)

    # The receiver recovers; the person replays that delivery.
    receiver.fail(path, False)
    with page.expect_navigation():
        failed.get_by_role("button", name="Replay this delivery").click()
    flash = page.locator(".flash-success")
    assert "queued again" in flash.inner_text(), page.content()
    got = receiver.wait_for(path, status=204)
    assert json.loads(got["body"])["id"] == event_id

    # The next attempt of that delivery shows as delivered (the page reloaded by hand: the
    # message is final, so the page no longer follows it), and its Replay button is gone.
    def delivered():
        return page.locator('li[data-kind="webhook_attempt"]').filter(has_text=event_id).filter(
            has_text="delivered")

    deadline = time.monotonic() + 15
    while delivered().count() == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        page.reload()
    assert delivered().count() == 1, page.content()
    assert "Webhook attempt 2" in delivered().inner_text()
    assert page.locator(f'form.replay-form:has(input[value="{event_id}"])').count() == 0
    no_sideways_scrolling(page, viewport_width)
    page.screenshot(path=f"/tmp/h6-replay-after-{viewport_width}.png", full_page=True)
    screenshot(page, f"message-replay-{viewport_width}")
