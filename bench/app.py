"""The app's load for bench/send.sh (BENCH_SIGNINS) and bench/app.sh: a person set up through
an invite link, sign-ins at a fixed rate, and a signed-in session for page timings.

Usage:
  app.py accept BASE INVITE_URL PASSWORD            sets name and password through the invite
                                                    page (as a browser would: pre-session cookie,
                                                    CSRF token), prints the session cookie value
  app.py signin BASE EMAIL PASSWORD                 signs in once, prints the session cookie value
  app.py pace BASE EMAIL PASSWORD RATE SECS         RATE sign-ins per second for SECS s (each: GET
                                                    the form, POST it); prints one line
                                                    `RESULT signins=… ok=… other=… rate=… p50_ms=…
                                                    p99_ms=…`

Each sign-in is a real one (argon2id verification of the password, a new session). Loopback only;
every request has a timeout.
"""

import http.client
import math
import re
import sys
import threading
import time
import urllib.parse

CSRF = re.compile(r'name="csrf_token"\s+value="([^"]+)"')


def loopback(url):
    u = urllib.parse.urlparse(url)
    if u.hostname != "127.0.0.1":
        sys.exit(f"{url}: loopback (127.0.0.1) only")
    return u


class Browser:
    """One client with a cookie jar of the cookies the app sets (names and values only)."""

    def __init__(self, base):
        u = loopback(base)
        self.origin = f"{u.scheme}://{u.netloc}"
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        self.cookies = {}

    def request(self, method, path, form=None):
        headers = {"Origin": self.origin}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            self.conn.request(method, path, body=body, headers=headers)
            res = self.conn.getresponse()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn.request(method, path, body=body, headers=headers)
            res = self.conn.getresponse()
        text = res.read().decode(errors="replace")
        for name, value in res.getheaders():
            if name.lower() == "set-cookie":
                pair = value.split(";", 1)[0]
                k, _, v = pair.partition("=")
                if v:
                    self.cookies[k.strip()] = v.strip()
                else:
                    self.cookies.pop(k.strip(), None)
        return res.status, text

    def form_token(self, path):
        status, text = self.request("GET", path)
        m = CSRF.search(text)
        if status != 200 or not m:
            sys.exit(f"GET {path}: {status}, no csrf_token in the page")
        return m.group(1)

    def sign_in(self, email, password):
        token = self.form_token("/app/sign-in")
        status, _ = self.request(
            "POST", "/app/sign-in", {"email": email, "password": password, "csrf_token": token}
        )
        return status


def percentile(v, p):
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)] if v else "-"


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "accept":
        base, invite_url, password = sys.argv[2:5]
        b = Browser(base)
        path = urllib.parse.urlparse(invite_url).path
        token = b.form_token(path)
        status, text = b.request(
            "POST", path, {"name": "Bench Person", "password": password, "csrf_token": token}
        )
        if status not in (200, 303) or "tern_session" not in b.cookies:
            sys.exit(f"invite: {status} {text[:300]}")
        print(b.cookies["tern_session"])
    elif cmd == "signin":
        base, email, password = sys.argv[2:5]
        b = Browser(base)
        status = b.sign_in(email, password)
        if status != 303 or "tern_session" not in b.cookies:
            sys.exit(f"sign-in: {status}")
        print(b.cookies["tern_session"])
    elif cmd == "pace":
        base, email, password = sys.argv[2:5]
        rate, secs = float(sys.argv[5]), float(sys.argv[6])
        lat, ok, other = [], [0], [0]
        lock = threading.Lock()
        start = time.monotonic()
        n = int(rate * secs)
        # A few clients so one slow sign-in does not hold back the schedule.
        clients = max(1, min(8, int(rate)))

        def worker(k):
            b = Browser(base)
            for i in range(k, n, clients):
                due = start + i / rate
                d = due - time.monotonic()
                if d > 0:
                    time.sleep(d)
                b.cookies.clear()
                t = time.monotonic()
                status = b.sign_in(email, password)
                ms = (time.monotonic() - t) * 1000
                with lock:
                    lat.append(ms)
                    if status == 303:
                        ok[0] += 1
                    else:
                        other[0] += 1

        ts = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        took = time.monotonic() - start
        lat.sort()
        print(
            f"RESULT signins={len(lat)} ok={ok[0]} other={other[0]} rate={len(lat) / took:.1f} "
            f"p50_ms={percentile(lat, 50):.0f} p99_ms={percentile(lat, 99):.0f}"
        )
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
