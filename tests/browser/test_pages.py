"""The read-only working pages in a real browser: overview → conversations → a thread →
contacts → a contact → templates → a template (copy its example) → usage, at 1280 and 375 px,
never scrolling sideways. A server of its own, with the network's app secret, so a customer's
message can arrive through the signed network webhook as it would in production."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import pathlib
import tempfile
import time
import urllib.request
import uuid

import pytest
from conftest import Server, screenshot
from playwright.sync_api import expect

PASSWORD = "a long enough passphrase 42"
APP_SECRET = "pages-test-app-secret"
_n = itertools.count()


@pytest.fixture(scope="module")
def pages_server(receiver):
    with tempfile.TemporaryDirectory(prefix="tern-pages-") as tmp:
        s = Server(pathlib.Path(tmp), receiver.ca_file)
        s.env["TERN_APP_SECRET"] = APP_SECRET
        s.env["TERN_VERIFY_TOKEN"] = "pages-verify"
        try:
            s.start()
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="module")
def base_url(pages_server) -> str:
    """This module's pages open on its own server (overrides conftest's)."""
    return pages_server.base_url


def api(base: str, key: str, method: str, path: str, body=None):
    req = urllib.request.Request(
        f"{base}/api/public/v1{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def customer_writes(base: str, pnid: str, wa_id: str, name: str, text: str) -> None:
    """A text from a customer, as the network posts it (signed with the app secret)."""
    body = json.dumps({"object": "whatsapp_business_account", "entry": [{"id": "waba1", "changes": [{
        "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "14155550100", "phone_number_id": pnid},
            "contacts": [{"wa_id": wa_id, "profile": {"name": name}}],
            "messages": [{"from": wa_id, "id": f"wamid.{uuid.uuid4().hex}",
                          "timestamp": str(int(time.time())), "type": "text",
                          "text": {"body": text}}]}}]}]}).encode()
    sig = "sha256=" + hmac.new(APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
    req = urllib.request.Request(
        f"{base}/webhooks/whatsapp", method="POST", data=body,
        headers={"Content-Type": "application/json", "X-Hub-Signature-256": sig},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


def no_sideways_scrolling(page, width):
    scroll = page.evaluate("document.documentElement.scrollWidth")
    inner = page.evaluate("window.innerWidth")
    assert scroll <= inner, f"{page.url}: {scroll}px wide at {width}"


def world(server) -> str:
    """An organisation with a number, a customer who wrote in, a tagged contact and a
    template; its owner's invite link."""
    n = next(_n)
    pnid = f"10654035224290{n}"
    org = server.admin("org", "create", "--name", f"Pages {n}", "--plan", "growth")["id"]
    server.admin("number", "add", "--org", org, "--phone-number-id", pnid,
                 "--display-phone-number", "+14155550100", "--waba-id", "waba1",
                 "--access-token", "token")
    owner = server.admin("member", "add", "--org", org, "--email", f"pages{n}@browser.test",
                         "--role", "owner")
    key = server.admin("key", "create", "--org", org, "--member", owner["id"], "--name", "setup",
                       "--preset", "full_access")["key"]
    base = server.base_url
    api(base, key, "POST", "/contacts", {"phone": "+447700900555", "name": "Grace Hopper",
                                         "tags": ["vip", "beta-tester"]})
    api(base, key, "POST", "/templates", {
        "name": "order_shipped", "language": "en_US", "category": "utility", "waba_id": "waba1",
        "components": [{"type": "BODY", "text": "Your order {{1}} is on its way",
                        "example": {"body_text": [["A-42"]]}}]})
    customer_writes(base, pnid, "447700900111", "Kim", "Where is my order?")
    return owner["invite_url"]


def test_the_working_pages(page, pages_server, viewport_width):
    invite = world(pages_server)
    page.goto(invite)
    page.get_by_label("Your name").fill("Ada Lovelace")
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Create account and sign in").click()
    w = viewport_width

    def open_nav(name):
        menu = page.locator("details.nav-menu")
        if not menu.evaluate("d => d.open"):
            page.locator("details.nav-menu > summary").click()
        page.get_by_role("navigation", name="Main").get_by_role("link", name=name).click()

    # The home page is the overview once there is a number.
    assert page.get_by_role("heading", name="Messages of the last 24 hours").is_visible()
    open_nav("Overview")
    assert page.get_by_role("heading", name="Numbers").is_visible()
    assert "+14155550100" in page.content()
    no_sideways_scrolling(page, w)
    screenshot(page, f"overview-{w}")

    open_nav("Conversations")
    # The customer's message is applied by the inbox worker: reload until it shows.
    for _ in range(50):
        if page.get_by_role("link", name="Kim").count():
            break
        time.sleep(0.2)
        page.reload()
    no_sideways_scrolling(page, w)
    screenshot(page, f"conversations-{w}")
    page.get_by_role("link", name="Kim").click()
    assert page.get_by_role("heading", name="Conversation with Kim").is_visible()
    assert "Where is my order?" in page.content()
    no_sideways_scrolling(page, w)
    screenshot(page, f"conversation-thread-{w}")

    open_nav("Contacts")
    page.get_by_label("Search").fill("900555")
    page.get_by_role("button", name="Search").click()
    assert page.get_by_role("link", name="Kim").count() == 0
    no_sideways_scrolling(page, w)
    screenshot(page, f"contacts-{w}")
    page.get_by_role("link", name="Grace Hopper").click()
    assert page.get_by_role("heading", name="Grace Hopper").is_visible()
    assert "beta-tester" in page.content()
    no_sideways_scrolling(page, w)
    screenshot(page, f"contact-{w}")

    open_nav("Templates")
    no_sideways_scrolling(page, w)
    screenshot(page, f"templates-{w}")
    page.get_by_role("link", name="order_shipped").click()
    example = page.locator("#template-example").inner_text()
    assert json.loads(example)["template"]["name"] == "order_shipped"
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    copy = page.get_by_role("button", name="Copy")
    assert copy.is_visible(), "the script shows the copy button"
    copy.click()
    # The copy is asynchronous: wait for the button to say so.
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    assert json.loads(page.evaluate("navigator.clipboard.readText()")) == json.loads(example)
    no_sideways_scrolling(page, w)
    screenshot(page, f"template-{w}")

    open_nav("Usage and plan")
    assert page.get_by_role("heading", name="Count limits").is_visible()
    assert "growth" in page.content()
    no_sideways_scrolling(page, w)
    screenshot(page, f"usage-{w}")

    # Test mode: reached from the keys page; the magic recipients in a table.
    open_nav("Keys")
    page.get_by_role("link", name="About test mode").click()
    assert page.get_by_role("heading", name="Magic recipients").is_visible()
    assert page.get_by_role("row", name="+1 555 013 1026").is_visible()
    no_sideways_scrolling(page, w)
    screenshot(page, f"test-mode-{w}")
