"""The person's pages (profile, two-factor, sessions) in a real browser: they render at
1280 and 375 px without sideways scrolling, the QR code shows under the CSP, and enrolment
completes with a code computed here."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import struct
import time

from conftest import screenshot

PASSWORD = "a long enough browser passphrase"
_people = itertools.count(1)


def totp(secret_b32: str, at: float | None = None) -> str:
    """RFC 6238 (SHA-1, 6 digits, 30 s), as an authenticator app computes it."""
    key = base64.b32decode(secret_b32 + "=" * (-len(secret_b32) % 8))
    counter = struct.pack(">Q", int((at or time.time()) // 30))
    mac = hmac.new(key, counter, hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    value = struct.unpack(">I", mac[offset : offset + 4])[0] & 0x7FFFFFFF
    return f"{value % 1_000_000:06d}"


def join(page, run_admin, viewport_width: int) -> str:
    """A new owner of a new organisation, signed in through their invitation: the email."""
    n = next(_people)
    org = run_admin("org", "create", "--name", f"Person check {viewport_width} {n}")
    email = f"person{n}-{viewport_width}@browser.test"
    member = run_admin("member", "add", "--org", org["id"], "--email", email, "--role", "owner")
    page.goto(member["invite_url"])
    page.get_by_label("Your name").fill("Ada Lovelace-Byron, Countess of a long name")
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Create account and sign in").click()
    return email


def assert_fits(page, width: int, what: str) -> None:
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{what}: {scroll}px wide at {width}px"


def test_person_pages_render_and_fit(page, run_admin, viewport_width):
    join(page, run_admin, viewport_width)
    for path, heading, name in [
        ("/app/profile", "Profile", "profile"),
        ("/app/two-factor", "Two-factor authentication", "two-factor-off"),
        ("/app/sessions", "Your sessions", "sessions"),
    ]:
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        assert page.get_by_role("heading", level=1).inner_text() == heading
        assert_fits(page, viewport_width, path)
        screenshot(page, f"{name}-{viewport_width}")
    # The current session is marked, and its times are shown in the browser's zone with the
    # UTC value on hover.
    page.goto("/app/sessions")
    assert page.locator(".session-current").count() == 1
    title = page.locator(".session-current time").first.get_attribute("title")
    assert title and title.endswith("UTC"), title


def test_a_refused_password_shows_its_words(page, run_admin, viewport_width):
    join(page, run_admin, viewport_width)
    page.goto("/app/profile")
    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_label("New password").fill("short")
    with page.expect_navigation():
        page.get_by_role("button", name="Change password").click()
    assert "too short" in page.locator("#password-error").inner_text()
    assert page.get_by_label("New password").get_attribute("aria-invalid") == "true"
    assert_fits(page, viewport_width, "refused password")
    screenshot(page, f"profile-refused-{viewport_width}")


def test_two_factor_enrolment(page, run_admin, viewport_width):
    join(page, run_admin, viewport_width)
    page.goto("/app/two-factor")
    with page.expect_navigation():
        page.get_by_role("button", name="Set up two-factor authentication").click()
    assert page.url.endswith("/app/two-factor/setup")
    qr = page.locator(".qr svg")
    box = qr.bounding_box()
    assert box and box["width"] >= 150 and box["height"] >= 150, box
    assert_fits(page, viewport_width, "setup")
    screenshot(page, f"two-factor-setup-{viewport_width}")
    secret = page.locator("#totp-secret").inner_text().replace(" ", "")
    page.get_by_label("Code", exact=True).fill(totp(secret))
    with page.expect_navigation():
        page.get_by_role("button", name="Turn on two-factor authentication").click()
    assert "Store these somewhere safe" in page.content()
    assert page.locator("#recovery-codes li").count() == 10
    assert page.get_by_role("button", name="Copy the codes").is_visible()
    assert_fits(page, viewport_width, "recovery codes")
    screenshot(page, f"two-factor-codes-{viewport_width}")
    page.goto("/app/two-factor")
    assert page.get_by_label("A code from your authenticator app").is_visible()
    assert_fits(page, viewport_width, "two-factor on")
    screenshot(page, f"two-factor-on-{viewport_width}")
