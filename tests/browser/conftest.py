"""Browser tests of the app: the real ``tern serve`` driven by Debian's Chromium through
Playwright for Python (pinned in scripts/test.sh). Playwright's own browser downloads are never
used (``playwright install`` is not run): the system browser is launched by path.

Run: ``TERN_BIN=target/debug/tern .venv/bin/python -m pytest -q -p no:cacheprovider tests/browser``
after ``cargo build -p tern``. ``TERN_SCREENSHOTS=1`` also saves the pages to ``docs/app/``;
``TERN_CHROMIUM`` overrides the browser path.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest
from playwright.sync_api import sync_playwright

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "app"
CHROMIUM = os.environ.get("TERN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT = 15.0  # seconds for the server to answer /readyz


def tern_bin() -> str:
    path = os.environ.get("TERN_BIN") or str(ROOT / "target" / "debug" / "tern")
    if not os.access(path, os.X_OK):
        pytest.exit(f"no tern binary at {path}: run `cargo build -p tern` or set TERN_BIN", 2)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A ``tern serve`` on a free loopback port over a temporary SQLite database. It trusts
    the CA of the test's webhook receiver and may deliver to loopback (as an operator's
    ``TERN_ALLOW_NETWORKS`` would allow)."""

    def __init__(self, workdir: pathlib.Path, ca_file: pathlib.Path):
        self.bin = tern_bin()
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "serve.log"
        self.env = {
            **os.environ,
            "TERN_DATABASE_URL": f"sqlite://{workdir}/tern.db",
            "TERN_LISTEN": f"127.0.0.1:{self.port}",
            "TERN_PUBLIC_URL": self.base_url,
            "TERN_MEDIA_STORE": f"file://{workdir}/media",
            # Everything tern logs at info and debug: a test reads the log for secrets.
            "TERN_LOG": "debug,sqlx=warn,hyper=info,h2=info,rustls=info",
            # Never the real network.
            "TERN_GRAPH_URL": "http://127.0.0.1:9",
            "TERN_ALLOW_NETWORKS": "127.0.0.1/32",
            "TERN_EXTRA_CA_FILE": str(ca_file),
        }
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        # The database exists (migrated) before the server starts, as an operator's would.
        self.admin_raw("org", "list")
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [self.bin, "serve"], env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tern serve exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"tern serve did not answer /readyz in {WAIT}s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def admin_raw(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.bin, "admin", *args], env=self.env, capture_output=True, text=True, timeout=60
        )

    def admin(self, *args: str):
        """``tern admin ARGS`` against this server's database: its JSON answer."""
        done = self.admin_raw(*args)
        if done.returncode != 0:
            raise RuntimeError(f"tern admin {' '.join(args)} failed: {done.stderr}")
        return json.loads(done.stdout) if done.stdout.strip() else None


@pytest.fixture(scope="session")
def receiver():
    """An HTTPS webhook receiver on loopback (see receiver.py)."""
    from receiver import Receiver

    with tempfile.TemporaryDirectory(prefix="tern-receiver-") as tmp:
        r = Receiver(pathlib.Path(tmp))
        try:
            yield r
        finally:
            r.stop()


@pytest.fixture(scope="session")
def server(receiver):
    with tempfile.TemporaryDirectory(prefix="tern-browser-") as tmp:
        s = Server(pathlib.Path(tmp), receiver.ca_file)
        try:
            s.start()
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="session")
def base_url(server) -> str:
    return server.base_url


@pytest.fixture(scope="session")
def run_admin(server):
    return server.admin


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.exit(f"no Chromium at {CHROMIUM}: apt-get install -y chromium", 2)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(params=[1280, 375], ids=["1280px", "375px"])
def viewport_width(request) -> int:
    return request.param


@pytest.fixture
def page(browser, base_url, viewport_width):
    """A fresh page (own cookies) at ``viewport_width`` px. A script error, a console error or
    a failed asset (a page's own status is the test's business) fails the test."""
    context = browser.new_context(
        base_url=base_url, viewport={"width": viewport_width, "height": 900}
    )
    pg = context.new_page()
    errors: list[str] = []

    def on_console(m):
        # A failed load is reported below with its address (or is the page's own status).
        if m.type == "error" and not m.text.startswith("Failed to load resource"):
            errors.append(m.text)

    def on_response(r):
        if r.status >= 400 and r.request.resource_type != "document":
            errors.append(f"{r.status} {r.url}")

    pg.on("console", on_console)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("response", on_response)
    yield pg
    context.close()
    assert not errors, f"browser console errors: {errors}"


def screenshot(pg, name: str) -> None:
    """Saves ``docs/app/NAME.png`` when TERN_SCREENSHOTS=1."""
    if os.environ.get("TERN_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
