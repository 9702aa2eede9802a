"""The sign-in page in a real browser: it renders, works from the keyboard, fits 375 px."""

from __future__ import annotations

import urllib.request

from conftest import screenshot


def test_sign_in_page_renders(page, viewport_width):
    response = page.goto("/app/sign-in")
    assert response is not None and response.status == 200
    assert page.title() == "Sign in · Tern"
    assert page.get_by_label("Email").is_visible()
    assert page.get_by_label("Password").is_visible()
    assert page.get_by_role("button", name="Sign in").is_visible()
    token = page.locator("input[name=csrf_token]").get_attribute("value")
    assert token and len(token) == 43
    # The stylesheet loaded (CSP allows it): the header has the brand colour.
    bg = page.locator(".site-header").evaluate("e => getComputedStyle(e).backgroundColor")
    assert bg == "rgb(11, 79, 108)"
    screenshot(page, f"sign-in-{viewport_width}")


def test_app_root_leads_to_sign_in(page):
    page.goto("/app")
    assert page.url.endswith("/app/sign-in")


def test_keyboard_reaches_email_password_button(page):
    page.goto("/app/sign-in")
    order = []
    for _ in range(10):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "() => { const e = document.activeElement;"
            " return e.id || e.getAttribute('type') || e.className || e.tagName; }"
        )
        order.append(focused)
        if focused == "submit":
            break
    # The skip link first, then the brand, then the form in order.
    assert order[0] == "skip-link", order
    fields = [f for f in order if f in ("email", "password", "submit")]
    assert fields == ["email", "password", "submit"], order
    # The skip link moves focus to the content.
    page.goto("/app/sign-in")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


def test_no_sideways_scrolling_at_375(browser, base_url):
    context = browser.new_context(base_url=base_url, viewport={"width": 375, "height": 800})
    pg = context.new_page()
    for path in ["/app/sign-in", "/app/no-such-page"]:
        pg.goto(path)
        width = pg.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"{path}: {width}px wide"
    context.close()


def test_error_pages_are_in_the_app_style(page):
    response = page.goto("/app/no-such-page")
    assert response is not None and response.status == 404
    assert page.get_by_role("heading", name="Page not found").is_visible()
    page.get_by_role("link", name="Go to the app's home").click()
    assert page.url.endswith("/app/sign-in")


def test_keyboard_focus_is_visible(page):
    page.goto("/app/sign-in")
    page.locator("#email").focus()
    page.keyboard.press("Tab")  # keyboard focus, so :focus-visible applies
    outline = page.evaluate(
        "() => { const s = getComputedStyle(document.activeElement);"
        " return [document.activeElement.id, s.outlineStyle, s.outlineWidth]; }"
    )
    assert outline == ["password", "solid", "3px"], outline


def test_run_admin_shares_the_servers_database(run_admin, base_url):
    org = run_admin("org", "create", "--name", "Browser check")
    member = run_admin(
        "member", "add", "--org", org["id"], "--email", "owner@browser.test", "--role", "owner"
    )
    key = run_admin(
        "key", "create", "--org", org["id"], "--member", member["id"], "--name", "b",
        "--preset", "read_only",
    )["key"]
    req = urllib.request.Request(
        f"{base_url}/api/public/v1/phone-numbers", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200


def submit_sign_in(pg):
    pg.get_by_label("Email").fill("someone@example.com")
    pg.get_by_label("Password").fill("not the password")
    with pg.expect_navigation() as nav:
        pg.get_by_role("button", name="Sign in").click()
    return nav.value


def test_the_browsers_own_form_passes_the_csrf_guard(page):
    page.goto("/app/sign-in")
    response = submit_sign_in(page)
    # The cookie, token and Origin a real browser sends are accepted (what the sign-in
    # handler answers is the session layer's business).
    assert response is not None and response.status != 403, response.status


def test_a_form_from_another_origin_is_refused(browser, base_url):
    # The same server under another name is another origin than TERN_PUBLIC_URL's.
    other = base_url.replace("127.0.0.1", "localhost")
    context = browser.new_context()
    pg = context.new_page()
    pg.goto(f"{other}/app/sign-in")
    response = submit_sign_in(pg)
    assert response is not None and response.status == 403
    assert "This form expired or came from another site" in pg.content()
    context.close()
