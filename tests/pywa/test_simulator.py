"""Third-party client check: the pywa library (pinned 4.5.0) against the real simulator binary.

pywa's own client sends through the simulator (its Graph requests are routed there by an httpx
transport given to pywa's public ``session`` parameter), and every webhook the simulator posts
to a local receiver (127.0.0.1 only) goes through pywa's own webhook entry points
(``webhook_update_validator`` + ``webhook_update_handler``). Each update must come out as the
expected pywa type with the right ids; pywa reflects real network payloads, so a webhook that
pywa cannot parse is a simulator bug.

Run: ``.venv/bin/python -m pytest -q -p no:cacheprovider tests/pywa`` after ``cargo build -p tern``
(``TERN_BIN`` overrides the binary path).
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import re
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from pywa import WhatsApp
from pywa import errors as pywa_errors
from pywa import types
from pywa.types.message_status import PricingCategory
from pywa.types.templates import BodyText, TemplateLanguage

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECRET = "pywa-app-secret"
VERIFY = "pywa-verify"
PNID = "106540352242922"
WABA = "102290129340398"
TOKEN = "pywa-token"
PHONE = "16505551234"
WAIT = 10.0  # seconds; every wait below is bounded by this


def wait_for(what, probe, timeout=WAIT):
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class ToSimulator(httpx.BaseTransport):
    """Send pywa's requests for graph.facebook.com to the simulator instead."""

    def __init__(self, base: str):
        self._base = httpx.URL(base)
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "graph.facebook.com":
            request.url = request.url.copy_with(
                scheme=self._base.scheme, host=self._base.host, port=self._base.port
            )
            request.headers["host"] = f"{self._base.host}:{self._base.port}"
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


class Updates:
    """What pywa made of the webhooks: typed updates, and per raw update its field and type."""

    def __init__(self):
        self.lock = threading.Lock()
        self.typed: list = []
        self.raw: list[tuple[str, dict, object]] = []
        self.bad_signatures = 0
        self.pywa_errors: list[str] = []

    def of(self, cls, pred=lambda u: True):
        with self.lock:
            return [u for u in self.typed if type(u) is cls and pred(u)]

    def one(self, what, cls, pred):
        return wait_for(what, lambda: self.of(cls, pred))[0]


def make_client(sim_base: str, updates: Updates) -> WhatsApp:
    wa = WhatsApp(
        phone_id=PNID,
        token=TOKEN,
        waba_id=WABA,
        api_version="25.0",
        session=httpx.Client(transport=ToSimulator(sim_base), timeout=5.0),
        app_secret=SECRET,
        verify_token=VERIFY,
    )

    def typed(_, update):
        update.shared_data["typed"] = update
        with updates.lock:
            updates.typed.append(update)

    for register in (
        wa.on_message,
        wa.on_edited_message,
        wa.on_deleted_message,
        wa.on_callback_button,
        wa.on_phone_number_change,
        wa.on_message_status,
        wa.on_template_status_update,
        wa.on_template_category_update,
    ):
        register(typed)

    @wa.on_raw_update
    def raw(_, update):  # pywa calls the raw handler last, after the typed one
        with updates.lock:
            updates.raw.append((update.field, dict(update), update.shared_data.get("typed")))

    return wa


def start_receiver(holder: dict, updates: Updates) -> ThreadingHTTPServer:
    class Hook(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep pytest output clean
            pass

        def do_GET(self):  # the hub.challenge handshake, answered by pywa
            q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            body, status = holder["wa"].webhook_challenge_handler(
                vt=q.get("hub.verify_token"), ch=q.get("hub.challenge")
            )
            self._answer(status, body or "")

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            wa = holder["wa"]
            rejected = wa.webhook_update_validator(body, self.headers.get("x-hub-signature-256"))
            if rejected is not None:
                with updates.lock:
                    updates.bad_signatures += 1
                self._answer(rejected[1], rejected[0])
                return
            answer, status = wa.webhook_update_handler(body)
            self._answer(status, answer)

        def _answer(self, status, text):
            data = str(text).encode()
            self.send_response(status)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def start_simulator(callback: str) -> tuple[subprocess.Popen, str, list[str]]:
    target = os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target"))
    binary = os.environ.get("TERN_BIN", str(pathlib.Path(target) / "debug" / "tern"))
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary} not found: build it first (cargo build -p tern)")
    proc = subprocess.Popen(
        [
            binary, "simulator",
            "--listen", "127.0.0.1:0",
            "--callback-url", callback,
            "--app-secret", SECRET,
            "--verify-token", VERIFY,
            "--seed", "42",
            "--number", f"{PNID}:+15550783881:{WABA}:{TOKEN}",
            "--sent-delay-ms", "0",
            "--delivered-delay-ms", "0",
            "--read-delay-ms", "0",
            "--template-review", "manual",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    log: list[str] = []

    def drain():  # keep reading so the pipe never fills up
        for line in proc.stderr:
            log.append(re.sub(r"\x1b\[[0-9;]*m", "", line))

    threading.Thread(target=drain, daemon=True).start()

    def bound():
        if proc.poll() is not None:
            raise AssertionError(f"simulator exited early: {''.join(log)}")
        return next((m.group(1) for line in log if (m := re.search(r"addr=(\S+)", line))), None)

    addr = wait_for("the simulator to listen", bound)
    return proc, f"http://{addr}", log


class ErrorLog(logging.Handler):
    """pywa logs what it cannot parse (and carries on): collect those records."""

    def __init__(self, updates: Updates):
        super().__init__(level=logging.ERROR)
        self.updates = updates

    def emit(self, record):
        with self.updates.lock:
            self.updates.pywa_errors.append(record.getMessage())


@pytest.fixture(scope="module")
def world():
    updates = Updates()
    errors = ErrorLog(updates)
    logging.getLogger("pywa").addHandler(errors)
    holder: dict = {}
    receiver = start_receiver(holder, updates)
    callback = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    proc, base, log = start_simulator(callback)
    holder["wa"] = make_client(base, updates)
    ctl = httpx.Client(base_url=base, timeout=5.0)
    try:
        yield {"wa": holder["wa"], "ctl": ctl, "updates": updates, "base": base}
    finally:
        ctl.close()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        receiver.shutdown()
        logging.getLogger("pywa").removeHandler(errors)


def control(world, method, path, body=None, status=None):
    r = world["ctl"].request(method, path, json=body)
    assert r.status_code == (status or r.status_code), f"{method} {path}: {r.text}"
    assert r.status_code < 300 or status, f"{method} {path}: {r.status_code} {r.text}"
    return r.json()


def inject(world, **body):
    return control(world, "POST", "/_sim/inbound", {"phone_number_id": PNID, **body}, 201)


@pytest.fixture(scope="module")
def zoe(world):
    """A customer with a username and no phone number the network shows."""
    return control(
        world,
        "POST",
        "/_sim/customers",
        {"username": "zoe.tern", "parent_user_id": "US.ENT.4242", "profile_name": "Zoe"},
        201,
    )


@pytest.fixture(scope="module")
def templates(world):
    """Approved templates seeded through the control API: name → id."""
    seeds = [
        {"name": "order_update", "category": "UTILITY",
         "components": [{"type": "BODY", "text": "Hi {{1}}, your order shipped.",
                         "example": {"body_text": [["Ann"]]}}]},
        {"name": "login_code", "category": "AUTHENTICATION",
         "components": [{"type": "BODY", "add_security_recommendation": True},
                        {"type": "BUTTONS", "buttons": [{"type": "OTP", "otp_type": "COPY_CODE"}]}]},
    ]
    return {
        t["name"]: control(world, "POST", "/_sim/templates", {"waba_id": WABA, "language": "en_US", **t}, 201)["id"]
        for t in seeds
    }


def test_handshake_goes_through_pywa(world):
    v = control(world, "POST", "/_sim/callback/verify", {})
    assert v["verified"] is True, v


def test_inbound_messages_parse_as_pywa_types(world, zoe):
    ups = world["updates"]
    hi = inject(world, **{"from": PHONE, "profile_name": "Ann", "type": "text", "text": {"body": "hello"}})
    m = ups.one("the phone customer's text", types.Message, lambda u: u.id == hi["wamid"])
    assert m.type == types.MessageType.TEXT and m.text == "hello"
    assert m.from_user.wa_id == PHONE
    assert m.from_user.bsuid == hi["from_user_id"]
    assert m.from_user.name == "Ann" and m.from_user.username is None
    assert m.metadata.phone_number_id == PNID and m.waba_id == WABA

    z = inject(world, username="zoe.tern", type="text", text={"body": "hi from zoe"})
    m = ups.one("the username customer's text", types.Message, lambda u: u.id == z["wamid"])
    assert m.from_user.wa_id is None, "the network withholds the phone"
    assert m.from_user.bsuid == zoe["user_id"] == z["from_user_id"]
    assert m.from_user.parent_bsuid == "US.ENT.4242"
    assert m.from_user.username == "zoe.tern" and m.from_user.name == "Zoe"
    assert m.chat.id == zoe["user_id"]

    img = inject(world, from_user_id=zoe["user_id"], type="image", image={"caption": "look"})
    m = ups.one("an image", types.Message, lambda u: u.id == img["wamid"])
    assert m.image is not None and m.image.id and m.caption == "look"

    edit = inject(
        world,
        **{"from": PHONE, "type": "edit",
           "edit": {"original_message_id": hi["wamid"], "message": {"type": "text", "text": {"body": "hello!"}}}},
    )
    e = ups.one("the edit", types.EditedMessage, lambda u: u.id == edit["wamid"])
    assert e.original_message_id == hi["wamid"]
    assert e.message.text == "hello!" and e.from_user.wa_id == PHONE

    rv = inject(world, username="zoe.tern", type="revoke", revoke={"original_message_id": z["wamid"]})
    d = ups.one("the revoke", types.DeletedMessage, lambda u: u.id == rv["wamid"])
    assert d.original_message_id == z["wamid"]
    assert d.from_user.username == "zoe.tern" and d.from_user.wa_id is None

    tap = inject(
        world,
        **{"from": PHONE, "type": "interactive",
           "interactive": {"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes"}}},
    )
    b = ups.one("the button reply", types.CallbackButton, lambda u: u.id == tap["wamid"])
    assert b.data == "yes" and b.title == "Yes"

    sysmsg = inject(
        world,
        **{"from": PHONE, "type": "system",
           "system": {"body": "Ann changed number", "type": "user_changed_number", "wa_id": "16505550000"}},
    )
    c = ups.one("the number change", types.PhoneNumberChange, lambda u: u.id == sysmsg["wamid"])
    assert c.old_wa_id == PHONE and c.new_wa_id == "16505550000"


def statuses_of(ups, wamid, n):
    got = wait_for(
        f"{n} statuses of {wamid}",
        lambda: (s := ups.of(types.MessageStatus, lambda u: u.id == wamid)) and len(s) >= n and s,
    )
    return {s.status.value: s for s in got}


def test_pywa_sends_text_template_and_to_a_bsuid(world, zoe, templates):
    wa, ups = world["wa"], world["updates"]
    phone_bsuid = next(
        c["user_id"] for c in control(world, "GET", "/_sim/customers")["data"] if c.get("wa_id") == PHONE
    )

    sent = wa.send_message(to=PHONE, text="hello from pywa", tracker="t-text")
    assert sent.id.startswith("wamid.") and sent.chat.id == PHONE and sent.input == PHONE
    st = statuses_of(ups, sent.id, 3)
    assert set(st) == {"sent", "delivered", "read"}
    for s in st.values():
        assert s.tracker == "t-text" and s.error is None
        assert s.from_user.wa_id == PHONE and s.from_user.bsuid == phone_bsuid
    assert st["sent"].pricing.category == PricingCategory.SERVICE

    tpl = wa.send_template(
        to=PHONE, name="order_update", language=TemplateLanguage.ENGLISH_US,
        params=[BodyText.params("Ann")], tracker="t-tpl",
    )
    assert tpl.status is not None and tpl.status.value == "accepted"
    st = statuses_of(ups, tpl.id, 3)
    assert st["sent"].pricing.category == PricingCategory.UTILITY
    assert st["read"].tracker == "t-tpl"

    to_zoe = wa.send_message(to=zoe["user_id"], text="hello zoe", tracker="t-bsuid")
    assert to_zoe.chat.id == zoe["user_id"] and to_zoe.input == zoe["user_id"]
    st = statuses_of(ups, to_zoe.id, 3)
    for name, s in st.items():
        assert s.from_user.bsuid == zoe["user_id"] and s.from_user.wa_id is None
        assert s.from_user.parent_bsuid == "US.ENT.4242"
        assert s.from_user.username == (None if name == "sent" else "zoe.tern"), name

    with pytest.raises(pywa_errors.BSUIDRecipientNotSupported) as err:
        wa.send_template(to=zoe["user_id"], name="login_code", language=TemplateLanguage.ENGLISH_US)
    assert err.value.code == 131062


def test_template_updates_and_summary(world, templates):
    wa, ups = world["wa"], world["updates"]
    tpl_id = templates["order_update"]
    control(world, "POST", f"/_sim/templates/{tpl_id}/category", {"new_category": "MARKETING"})
    u = ups.one("the category update", types.TemplateCategoryUpdate, lambda u: u.template_id == tpl_id)
    assert u.template_name == "order_update" and u.id == WABA
    assert u.new_category.value == "MARKETING" and u.previous_category.value == "UTILITY"

    control(world, "POST", f"/_sim/templates/{tpl_id}/status", {"event": "PAUSED"})
    s = ups.one("the status update", types.TemplateStatusUpdate, lambda u: u.template_id == tpl_id)
    assert s.new_status.value == "PAUSED"

    listed = wa.get_templates()
    assert listed.total_count == 2 and listed.message_template_count == 2
    assert listed.message_template_limit == 250 and listed.are_translations_complete is True
    assert {t.name for t in listed} == {"order_update", "login_code"}


def test_a_new_phone_reaches_pywa_as_a_number_change(world):
    ups = world["updates"]
    control(world, "POST", "/_sim/customers", {"wa_id": "16505550123", "profile_name": "Bea"}, status=201)
    change = control(world, "POST", "/_sim/identity_change", {"wa_id": "16505550123", "new_wa_id": "16505550124"})
    # the network's shape: one `user_changed_number` system message, no `contacts`
    c = ups.one("the number change", types.PhoneNumberChange, lambda u: u.id == change["wamids"][0])
    assert c.old_wa_id == "16505550123" and c.new_wa_id == "16505550124"
    _, raw, _ = wait_for("its raw update", lambda: next((r for r in list(ups.raw) if r[2] is c), None))
    value = raw["entry"][0]["changes"][0]["value"]
    assert "contacts" not in value
    assert value["messages"][0]["system"]["user_id"] == change["user_id"]


def test_every_webhook_parsed(world):
    ups = world["updates"]
    time.sleep(0.3)  # let the last statuses land
    with ups.lock:
        raw = list(ups.raw)
        assert ups.bad_signatures == 0
        assert not ups.pywa_errors, ups.pywa_errors
    # 7 inbound + 3 × 3 statuses + category and status updates + a number change
    assert len(raw) == 19, [f for f, _, _ in raw]
    unparsed = [(f, json.dumps(r)[:300]) for f, r, typed in raw if typed is None]
    assert not unparsed, f"pywa could not build a typed update from: {unparsed}"
    kinds = {type(t).__name__ for _, _, t in raw if t is not None}
    assert kinds >= {
        "Message", "EditedMessage", "DeletedMessage", "CallbackButton", "PhoneNumberChange",
        "MessageStatus", "TemplateCategoryUpdate", "TemplateStatusUpdate",
    }, kinds
