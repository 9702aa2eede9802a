"""The app's main flows in a real browser (issue 29's proof): an invited person sets a
password, enrols two-factor, signs out and in again with a code, creates a "Send messages" key
(asked to confirm), uses it against the public API, revokes it in the app (the next API call is
401); a developer's permission list; a subscription made in the app receives a test event
that the official Standard Webhooks library verifies; signing in from the keyboard alone."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import struct
import time
import urllib.error
import urllib.request

import standardwebhooks
from conftest import screenshot

PASSWORD = "a long browser passphrase 7"
# Every secret the flows saw (key values, signing secrets, recovery codes): none may be in
# the server's log (checked last).
SEEN: list[str] = [PASSWORD]


def totp(secret_b32: str, step: int) -> str:
    """RFC 6238 (SHA-1, 6 digits) for the 30-second step ``step``."""
    key = base64.b32decode(secret_b32 + "=" * (-len(secret_b32) % 8), casefold=True)
    mac = hmac.new(key, struct.pack(">Q", step), hashlib.sha1).digest()
    off = mac[-1] & 0x0F
    code = (struct.unpack(">I", mac[off : off + 4])[0] & 0x7FFFFFFF) % 1_000_000
    return f"{code:06d}"


class Authenticator:
    """A phone's authenticator app: each code is for a step later than the last one used
    (Tern refuses a replayed code), within the one step of drift Tern allows."""

    def __init__(self, secret: str):
        self.secret = secret
        self.last = int(time.time()) // 30 - 2

    def code(self) -> str:
        while True:
            now = int(time.time()) // 30
            step = max(now - 1, self.last + 1)
            if step <= now + 1:
                self.last = step
                return totp(self.secret, step)
            time.sleep(1)


def api(base_url: str, key: str, path: str) -> int:
    req = urllib.request.Request(f"{base_url}/api/public/v1{path}")
    req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def new_org(run_admin, name: str) -> str:
    return run_admin("org", "create", "--name", name)["id"]


def accept_invite(page, run_admin, org: str, email: str, role: str) -> None:
    invite = run_admin("member", "add", "--org", org, "--email", email, "--role", role)
    page.goto(invite["invite_url"])
    page.get_by_label("Your name").fill(email.split("@")[0].title())
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name=re.compile("Create account")).click()
    page.wait_for_url("**/app")


def sign_out(page) -> None:
    page.locator("details.person-menu summary").click()
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/app/sign-in**")


def sign_in(page, email: str, password: str) -> None:
    page.goto("/app/sign-in")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def test_invite_two_factor_key_and_revoke(page, run_admin, base_url, viewport_width):
    org = new_org(run_admin, f"Flow {viewport_width}")
    email = f"owner{viewport_width}@flow.test"
    accept_invite(page, run_admin, org, email, "owner")
    screenshot(page, f"home-{viewport_width}")

    # Two-factor: the QR code and the secret, one code, then the recovery codes once.
    page.goto("/app/two-factor")
    page.get_by_role("button", name=re.compile("Turn on two-factor|Set up two-factor")).click()
    assert page.locator("svg").first.is_visible(), "the QR code"
    secret = page.locator("[data-totp-secret]").inner_text().replace(" ", "")
    phone = Authenticator(secret)
    page.get_by_label(re.compile("Code")).fill(phone.code())
    page.get_by_role("button", name=re.compile("Turn on|Confirm|Verify")).click()
    codes = page.locator("[data-recovery-codes]").inner_text()
    found = re.findall(r"[a-z0-9]{5}-[a-z0-9]{5}", codes)
    assert len(found) == 10, codes
    SEEN.extend(found)
    SEEN.append(secret)

    # Out, and in again with a code.
    sign_out(page)
    sign_in(page, email, PASSWORD)
    page.get_by_label("Code").fill(phone.code())
    page.get_by_role("button", name="Continue").click()
    page.wait_for_url("**/app")

    # A "Send messages" key: signing in is not a confirmation, so the form asks for a code.
    page.goto("/app/keys/new")
    page.get_by_label("Name").fill("Checkout service")
    page.get_by_label("Send messages").check()
    confirm = page.locator("#confirm")
    assert confirm.is_visible(), "confirmation asked"
    confirm.fill(phone.code())
    page.get_by_role("button", name=re.compile("Create key")).click()
    value = page.locator("[data-key-value]").inner_text().strip()
    assert value.startswith("tern_"), value
    SEEN.append(value)
    assert api(base_url, value, "/phone-numbers") == 200

    # The keys page never shows the value again.
    page.goto("/app/keys")
    assert value not in page.content()

    # Revoke it in the app (confirmed a moment ago): the next API call is 401.
    page.get_by_role("row", name=re.compile("Checkout service")).get_by_role(
        "button", name="Revoke"
    ).click()
    if page.locator("#confirm").count():
        page.locator("#confirm").fill(phone.code())
        page.get_by_role("button", name="Revoke").click()
    page.wait_for_load_state()
    assert api(base_url, value, "/phone-numbers") == 401


def test_developer_permission_list(page, run_admin, viewport_width):
    org = new_org(run_admin, "Developers")
    accept_invite(page, run_admin, org, f"dev{viewport_width}@flow.test", "developer")
    page.goto("/app/keys/new")
    send = page.get_by_label("Send messages")
    assert send.is_disabled(), "a developer cannot choose the send preset"
    assert page.get_by_label("messages.send").is_disabled()
    assert page.get_by_label("messages.read").is_enabled()
    assert "Developers cannot send" in page.content()


def test_subscription_receives_a_verified_test_event(page, run_admin, receiver, viewport_width):
    org = new_org(run_admin, "Hooks")
    accept_invite(page, run_admin, org, f"hooks{viewport_width}@flow.test", "admin")
    # A key for the subscription to belong to.
    page.goto("/app/keys/new")
    page.get_by_label("Name").fill("Events")
    page.get_by_label("Full access").check()
    if page.locator("#confirm").count():
        page.locator("#confirm").fill(PASSWORD)
    page.get_by_role("button", name=re.compile("Create key")).click()
    assert page.locator("[data-key-value]").inner_text().startswith("tern_")

    page.goto("/app/webhooks/new")
    page.get_by_label("URL").fill(receiver.url(f"/tern-events-{viewport_width}"))
    page.get_by_label("message.status").check()
    if page.locator("#confirm").count():
        page.locator("#confirm").fill(PASSWORD)
    page.get_by_role("button", name=re.compile("Add endpoint|Create")).click()
    secret = page.locator("[data-secret-value]").inner_text().strip()
    assert secret.startswith("whsec_"), secret
    SEEN.append(secret)

    page.get_by_role("link", name=re.compile("endpoint|Open", re.I)).first.click()
    page.get_by_role("button", name=re.compile("Send test event")).click()
    page.wait_for_load_state()
    assert re.search(r"\b2\d\d\b", page.locator("[data-test-attempt]").inner_text())

    got = receiver.wait_for(f"/tern-events-{viewport_width}")
    body = got["body"].decode()
    verified = standardwebhooks.Webhook(secret).verify(body, got["headers"])
    assert verified["type"] == "message.status"
    assert json.loads(body)["type"] == "message.status"


def test_keyboard_only_sign_in(page, run_admin, viewport_width):
    org = new_org(run_admin, "Keyboard")
    email = f"keys{viewport_width}@flow.test"
    accept_invite(page, run_admin, org, email, "developer")
    sign_out(page)
    page.goto("/app/sign-in")
    # Tab to the email field (after the skip link and the brand), type, tab, type, Enter.
    for _ in range(6):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "email":
            break
    assert page.evaluate("document.activeElement.id") == "email"
    page.keyboard.type(email)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "password"
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url("**/app")
    assert "Keyboard" in page.content()


def test_no_secret_in_the_server_log(server):
    """Runs last: the server's log (debug level) holds none of the secrets the flows saw."""
    log = server.log.read_text(errors="replace")
    assert "app" in log, "the log has the app's requests"
    for secret in SEEN:
        assert secret not in log, f"a secret in the log: {secret[:8]}…"
