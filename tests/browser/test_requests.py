"""The request log in a real browser: a failing POST /messages made with a key is found by
its request id typed in the search box, and its page shows the error body; a typo is
explained; no sideways scrolling at 375 px; screenshots in docs/app."""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.request

from conftest import screenshot

PASSWORD = "a long enough passphrase 42"
_n = itertools.count()


def signed_in_owner_with_key(page, run_admin) -> str:
    """A new organisation whose owner signs in through the invite link and holds a key
    (created by the operator): the key's value."""
    n = next(_n)
    org = run_admin("org", "create", "--name", f"Requests check {n}", "--plan", "growth")
    member = run_admin(
        "member", "add", "--org", org["id"], "--email", f"requests{n}@browser.test", "--role", "owner"
    )
    key = run_admin(
        "key", "create", "--org", org["id"], "--member", member["id"],
        "--name", "Shop backend", "--preset", "send_messages",
    )
    page.goto(member["invite_url"])
    page.get_by_label("Your name").fill("Ada Lovelace")
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Create account and sign in").click()
    return key["key"]


def failing_send(base_url: str, key: str) -> str:
    """A POST /messages the API refuses (no `text` object): the answer's request id."""
    body = json.dumps({"to": "+1 415 555 0123", "type": "text"}).encode()
    req = urllib.request.Request(
        f"{base_url}/api/public/v1/messages",
        data=body,
        method="POST",
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Idempotency-Key": "order-20260131-0042",
            "User-Agent": "shop-backend/1.4",
        },
    )
    try:
        urllib.request.urlopen(req, timeout=5)
    except urllib.error.HTTPError as e:
        assert e.code == 400, e.read()
        return e.headers["X-Request-Id"]
    raise AssertionError("the send was accepted")


def no_sideways_scrolling(page, width):
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{page.url}: {scroll}px wide at {width}"


def find(page, request_id: str) -> None:
    page.get_by_label("Find a request by its id").fill(request_id)
    with page.expect_navigation():
        page.get_by_role("button", name="Find").click()


def test_a_request_is_found_by_its_id_and_shows_its_error(page, run_admin, base_url, viewport_width):
    key = signed_in_owner_with_key(page, run_admin)
    page.goto("/app/requests")
    assert "No request yet" in page.content()
    screenshot(page, f"requests-empty-{viewport_width}")

    request_id = failing_send(base_url, key)
    # The log is written a moment after the answer (in batches, off the request path).
    for _ in range(100):
        page.goto("/app/requests")
        if request_id in page.content():
            break
        page.wait_for_timeout(100)
    assert page.get_by_role("link", name="POST /messages").first.is_visible()
    no_sideways_scrolling(page, viewport_width)
    screenshot(page, f"requests-{viewport_width}")

    # A typo says so, next to the box.
    find(page, request_id[:-1])
    assert page.get_by_text("is not a request id").is_visible()
    assert page.get_by_label("Find a request by its id").get_attribute("aria-invalid") == "true"

    find(page, request_id)
    assert page.url.endswith(f"/app/requests/{request_id}")
    assert page.locator("#request-id-value").inner_text() == request_id
    body = page.locator("#error-body").inner_text()
    assert json.loads(body)["code"] == "validation_failed"
    assert json.loads(body)["request_id"] == request_id
    content = page.content()
    assert "Shop backend" in content
    assert "order-20260131-0042" in content
    assert "shop-backend/1.4" in content
    assert key not in content
    no_sideways_scrolling(page, viewport_width)
    screenshot(page, f"request-{viewport_width}")

    page.get_by_role("link", name="← Request log").click()
    page.get_by_label("Status").select_option("2xx")
    with page.expect_navigation():
        page.get_by_role("button", name="Filter").click()
    assert "No request matches these filters" in page.content()
