"""The members, audit log and settings pages in a real browser, at 1280 and 375 px: an owner
invites a developer in the app (the link shown once, with a copy button), the link sets the
password; the owner changes the developer's role (asked to confirm), reads the audit log and
requires two-factor. No page scrolls sideways."""

from __future__ import annotations

import re

from conftest import screenshot
from test_flows import PASSWORD, accept_invite, new_org


def no_sideways_scroll(page, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.url


def test_invite_role_audit_and_settings(page, run_admin, browser, base_url, viewport_width):
    org = new_org(run_admin, f"Team {viewport_width}")
    accept_invite(page, run_admin, org, f"lead{viewport_width}@team.test", "owner")
    assert "Create your first key" in page.content(), "a new organisation's next step"
    no_sideways_scroll(page, viewport_width)

    # Invite: the link once, with a copy button (the script shows it).
    page.goto("/app/members")
    page.get_by_label("Email").fill(f"dev{viewport_width}@team.test")
    page.get_by_label("Role").select_option("developer")
    page.get_by_role("button", name="Invite").click()
    link = page.locator("#invite-link").input_value()
    assert "/app/invite/" in link, link
    assert page.get_by_role("button", name="Copy link").is_visible()
    no_sideways_scroll(page, viewport_width)
    screenshot(page, f"members-invited-{viewport_width}")
    page.goto("/app/members")
    assert "/app/invite/" not in page.content(), "shown once"

    # The link sets the developer's password, in another browser.
    other = browser.new_context(base_url=base_url, viewport={"width": viewport_width, "height": 900})
    dev = other.new_page()
    dev.goto(link)
    dev.get_by_label("Your name").fill("Dana Dev")
    dev.get_by_label("Password").fill(PASSWORD)
    dev.get_by_role("button", name=re.compile("Create account")).click()
    dev.wait_for_url("**/app")
    dev.goto("/app/audit")
    assert "You cannot open this page" in dev.content()
    other.close()

    # The role change asks for the password.
    page.goto("/app/members")
    page.get_by_role("link", name=re.compile("Manage Dana Dev")).click()
    page.get_by_label("New role").select_option("admin")
    assert page.locator("#confirm").is_visible()
    page.locator("#confirm").fill(PASSWORD)
    no_sideways_scroll(page, viewport_width)
    page.get_by_role("button", name="Change role").click()
    page.wait_for_url("**/app/members")
    assert "is now admin" in page.content()

    # The audit log says who did it.
    page.goto("/app/audit")
    content = page.content()
    for words in ["Changed a member's role", "Invited a member", "Signed in"]:
        assert words in content, words
    no_sideways_scroll(page, viewport_width)
    screenshot(page, f"audit-{viewport_width}")

    # Two-factor required: confirmed a moment ago, so no password; the owner is sent to enrol.
    page.goto("/app/settings")
    page.get_by_label("Require two-factor for every member").check()
    no_sideways_scroll(page, viewport_width)
    screenshot(page, f"settings-{viewport_width}")
    page.get_by_role("button", name="Save").click()
    page.goto("/app/members")
    page.wait_for_url("**/app/two-factor")
