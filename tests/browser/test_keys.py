"""The keys and webhooks pages in a real browser: create a key (value once, copy button),
add an endpoint, its page; no sideways scrolling at 375 px; screenshots in docs/app."""

from __future__ import annotations

import itertools
import re

from conftest import screenshot

PASSWORD = "a long enough passphrase 42"
_n = itertools.count()


def signed_in_owner(page, run_admin) -> str:
    """A new organisation whose owner signs in through the invite link: its id."""
    n = next(_n)
    org = run_admin("org", "create", "--name", f"Keys check {n}", "--plan", "growth")
    member = run_admin(
        "member", "add", "--org", org["id"], "--email", f"keys{n}@browser.test", "--role", "owner"
    )
    page.goto(member["invite_url"])
    page.get_by_label("Your name").fill("Ada Lovelace")
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Create account and sign in").click()
    return org["id"]


def no_sideways_scrolling(page, width):
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{page.url}: {scroll}px wide at {width}"


def test_keys_and_webhooks_pages(page, run_admin, viewport_width):
    signed_in_owner(page, run_admin)
    page.goto("/app/keys")
    assert page.get_by_role("heading", name="API keys").is_visible()
    screenshot(page, f"keys-empty-{viewport_width}")
    page.get_by_role("link", name="Create a key").first.click()
    page.get_by_label("Name").fill("Order notifications")
    page.get_by_label("Send messages").check()
    page.get_by_label("Your password").fill(PASSWORD)
    no_sideways_scrolling(page, viewport_width)
    screenshot(page, f"keys-new-{viewport_width}")
    with page.expect_navigation() as nav:
        page.get_by_role("button", name="Create key").click()
    assert nav.value.status == 200
    assert nav.value.headers["cache-control"] == "no-store"
    value = page.locator("#key-value").inner_text().strip()
    assert value.startswith("tern_")
    copy = page.get_by_role("button", name="Copy")
    assert copy.is_visible(), "the script shows the copy button"
    no_sideways_scrolling(page, viewport_width)
    screenshot(page, f"keys-created-{viewport_width}")
    page.get_by_role("link", name="Done: back to API keys").click()
    assert "Order notifications" in page.content()
    assert value not in page.content()
    no_sideways_scrolling(page, viewport_width)
    screenshot(page, f"keys-list-{viewport_width}")

    page.goto("/app/webhooks/new")
    page.get_by_label("URL").fill("https://example.com/tern/events")
    page.get_by_label("message.status").check()
    page.get_by_label("Description (optional)").fill("Order updates")
    no_sideways_scrolling(page, viewport_width)
    screenshot(page, f"webhooks-new-{viewport_width}")
    with page.expect_navigation():
        page.get_by_role("button", name="Add endpoint").click()
    assert page.locator("#secret-value").inner_text().startswith("whsec_")
    page.get_by_role("link", name="Done: back to the endpoint").click()
    assert page.get_by_role("heading", name="Delivery log").is_visible()
    no_sideways_scrolling(page, viewport_width)
    screenshot(page, f"webhook-{viewport_width}")
    page.goto("/app/webhooks")
    assert "Order updates" in page.content()
    no_sideways_scrolling(page, viewport_width)
    screenshot(page, f"webhooks-list-{viewport_width}")


def test_keys_pages_work_from_the_keyboard(page, run_admin):
    signed_in_owner(page, run_admin)
    page.goto("/app/keys/new")
    page.locator("#name").focus()
    page.keyboard.type("Keyboard key")
    # Tab reaches the preset radios, then the password field and the button.
    seen = []
    for _ in range(30):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("document.activeElement.id || document.activeElement.tagName"))
        if seen[-1] == "confirm":
            break
    assert "preset-send_messages" in seen or "preset-read_only" in seen, seen
    assert seen[-1] == "confirm", seen
    page.keyboard.type(PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator("#key-value").is_visible()


def test_revoke_from_the_keys_row(page, run_admin, base_url):
    import urllib.error
    import urllib.request

    signed_in_owner(page, run_admin)
    page.goto("/app/keys/new")
    page.get_by_label("Name").fill("Nightly job")
    page.get_by_label("Read only").check()
    page.get_by_label("Your password").fill(PASSWORD)
    page.get_by_role("button", name="Create key").click()
    value = page.locator("[data-key-value]").inner_text().strip()

    def status() -> int:
        req = urllib.request.Request(
            f"{base_url}/api/public/v1/phone-numbers", headers={"Authorization": f"Bearer {value}"}
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    assert status() == 200
    page.goto("/app/keys")
    # Confirmed a moment ago: the row's button revokes at once, and says so.
    page.get_by_role("row", name=re.compile("Nightly job")).get_by_role("button", name="Revoke").click()
    page.wait_for_load_state()
    assert "is revoked" in page.content()
    assert status() == 401
