"""Event-webhook load for bench/webhooks.sh (and bench/send.sh with BENCH_WEBHOOK_SUBS):
creates contacts and subscriptions through the public API, makes consent changes (paced or
as fast as a few keep-alive clients can), and waits for the receiver
(crates/server/examples/webhook_receiver.rs) to have every delivery.

Usage:
  webhooks.py contacts BASE KEY N PHONE_PREFIX OUT_FILE   N contacts (phone PREFIX + 5 digits),
                                                          ids written to OUT_FILE
  webhooks.py subs BASE KEY RECEIVER_HTTPS N EVENT_TYPE   N subscriptions, URL RECEIVER/s/1 … /s/N
  webhooks.py pace BASE KEY IDS_FILE RATE SECS CLIENTS    RATE consent changes per second for SECS s
  webhooks.py burst BASE KEY IDS_FILE EVENTS CLIENTS      EVENTS consent changes, CLIENTS at once
  webhooks.py wait STATS_BASE EXPECTED TIMEOUT STALL      until the receiver counts EXPECTED
                                                          requests, at most TIMEOUT s, or STALL s
                                                          without a new one
pace/burst print one line `RESULT key=value …` (changes answered 200, others, the rate at
which they were made, API latency p50/p99 in ms); wait prints `WAIT count=… waited_s=… why=…`.
Each client changes its own share of the contacts, round-robin, alternating opted_in /
opted_out per round: a contact is never changed by two requests at once, so every change
answered 200 is applied and makes one event.
Loopback only: BASE and RECEIVER must be http(s)://127.0.0.1:PORT. Every wait is bounded.
"""

import http.client
import json
import math
import sys
import threading
import time
import urllib.parse

API = "/api/public/v1"


def loopback(url):
    u = urllib.parse.urlparse(url)
    if u.hostname != "127.0.0.1":
        sys.exit(f"{url}: loopback (127.0.0.1) only")
    return u


class Client:
    """One keep-alive connection to tern."""

    def __init__(self, base, key):
        u = loopback(base)
        self.host, self.port = u.hostname, u.port
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.conn = None

    def call(self, method, path, body):
        data = json.dumps(body).encode()
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                self.conn.request(method, path, body=data, headers=self.headers)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]


def changes(base, key, ids, schedule, clients):
    """Makes len(schedule) consent changes; schedule[i] is the time (perf_counter) change i
    may start (0: at once). Client j changes only its own contacts (ids[j::clients]), one at
    a time, round-robin, alternating opted_in / opted_out per round: a contact is never
    changed by two requests at once, so no change is older than the stored one (which Tern
    would ignore, without an event) and every change answered 200 is one event.
    Returns (ok, bad, first_bad, wall_s, latencies_ms)."""
    total = len(schedule)
    lock = threading.Lock()
    state = {"next": 0, "ok": 0, "bad": 0, "first_bad": "", "lat": []}

    def worker(j):
        c = Client(base, key)
        mine = ids[j::clients]
        m = 0
        lat = []
        while True:
            with lock:
                i = state["next"]
                if i >= total:
                    break
                state["next"] = i + 1
            wait = schedule[i] - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            contact = mine[m % len(mine)]
            body = {"status": "opted_in" if (m // len(mine)) % 2 == 0 else "opted_out", "source": "bench"}
            m += 1
            t = time.perf_counter()
            try:
                status, body = c.call("POST", f"{API}/contacts/{contact}/consent", body)
            except Exception as e:  # noqa: BLE001 — counted, reported once
                status, body = 0, str(e).encode()
            lat.append((time.perf_counter() - t) * 1000)
            with lock:
                if status == 200:
                    state["ok"] += 1
                else:
                    state["bad"] += 1
                    if not state["first_bad"]:
                        state["first_bad"] = f"{status} {body[:200].decode(errors='replace')}"
        with lock:
            state["lat"].extend(lat)

    threads = [threading.Thread(target=worker, args=(j,)) for j in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return state["ok"], state["bad"], state["first_bad"], wall, state["lat"]


def result(ok, bad, first_bad, wall, lat):
    print(f"RESULT ok={ok} non200={bad} secs={wall:.2f} per_s={(ok + bad) / wall:.1f} "
          f"api_p50_ms={pct(lat, 50):.1f} api_p99_ms={pct(lat, 99):.1f}")
    if first_bad:
        print("FIRST_UNEXPECTED " + first_bad.replace("\n", " "))


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "contacts":
        base, key, n, prefix, out = args[0], args[1], int(args[2]), args[3], args[4]
        c = Client(base, key)
        ids = []
        for i in range(n):
            status, body = c.call("POST", f"{API}/contacts", {"phone": f"{prefix}{i:05d}"})
            if status != 201:
                sys.exit(f"POST /contacts answered {status}: {body[:300]!r}")
            ids.append(json.loads(body)["id"])
        with open(out, "w") as f:
            f.write("\n".join(ids) + "\n")
    elif mode == "subs":
        base, key, receiver, n, kind = args[0], args[1], args[2].rstrip("/"), int(args[3]), args[4]
        loopback(receiver)
        c = Client(base, key)
        for i in range(1, n + 1):
            status, body = c.call("POST", f"{API}/webhook-subscriptions",
                                  {"url": f"{receiver}/s/{i}", "events": [kind]})
            if status != 201:
                sys.exit(f"POST /webhook-subscriptions answered {status}: {body[:300]!r}")
            j = json.loads(body)
            if not j.get("id") or not str(j.get("secret", "")).startswith("whsec_"):
                sys.exit(f"POST /webhook-subscriptions: no id or secret in {body[:300]!r}")
        print(n)
    elif mode in ("pace", "burst"):
        base, key, ids_file = args[0], args[1], args[2]
        with open(ids_file) as f:
            ids = f.read().split()
        if mode == "pace":
            rate, secs, clients = float(args[3]), float(args[4]), int(args[5])
            total = max(1, int(rate * secs))
            t0 = time.perf_counter() + 0.05
            schedule = [t0 + i / rate for i in range(total)]
        else:
            total, clients = int(args[3]), int(args[4])
            schedule = [0.0] * total
        if len(ids) <= clients:
            sys.exit("needs more contacts than clients")
        result(*changes(base, key, ids, schedule, clients))
    elif mode == "wait":
        base, expected, timeout, stall = args[0].rstrip("/"), int(args[1]), float(args[2]), float(args[3])
        u = loopback(base)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        t0 = last_change = time.monotonic()
        last, why = -1, "timeout"
        while True:
            conn.request("GET", "/count")
            count = int(conn.getresponse().read())
            now = time.monotonic()
            if count != last:
                last, last_change = count, now
            if count >= expected:
                why = "complete"
                break
            if now - last_change >= stall:
                why = f"stalled {stall:.0f}s"
                break
            if now - t0 >= timeout:
                break
            time.sleep(0.2)
        print(f"WAIT count={last} expected={expected} waited_s={time.monotonic() - t0:.1f} why={why.replace(' ', '_')}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
