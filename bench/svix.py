"""svix-server load for bench/svix.sh: creates an application and its endpoints through
svix's API, sends messages (paced or as fast as a few keep-alive clients can) and prints the
same `RESULT` line as bench/webhooks.py (whose Client, pct and result it reuses; the wait for
the receiver is webhooks.py's `wait`).

Usage:
  svix.py setup BASE TOKEN RECEIVER_HTTPS N EVENT_TYPE   an application and N endpoints, URL
                                                         RECEIVER/s/1 … /s/N; prints the app id
  svix.py pace BASE TOKEN APP RATE SECS CLIENTS          RATE messages per second for SECS s
  svix.py burst BASE TOKEN APP EVENTS CLIENTS            EVENTS messages, CLIENTS at once

Each message is `{"eventType": EVENT_TYPE, "payload": {"type": …, "created_at": …, …}}`:
svix delivers the payload as it is, so the receiver reads `type` and `created_at` from it as
it does from Tern's events. `created_at` is the client's clock just before the POST (svix has
no field for a creation time a payload could carry), so svix's event → delivery latency
includes the API call, where Tern's starts inside it (Tern stamps the event while handling
the request): the API latency p50/p99 on the RESULT line says how much that is at most.
Loopback only: BASE and RECEIVER must be http(s)://127.0.0.1:PORT. Every wait is bounded.
"""

import datetime
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webhooks import Client, loopback, result  # noqa: E402

API = "/api/v1"
EVENT_TYPE = "contact.consent"


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def messages(base, token, app, schedule, clients):
    """Sends len(schedule) messages; schedule[i] is the time (perf_counter) message i may
    start (0: at once). Returns (ok, bad, first_bad, wall_s, latencies_ms) as
    webhooks.changes does; ok = answered 202 (accepted: svix delivers it)."""
    total = len(schedule)
    lock = threading.Lock()
    state = {"next": 0, "ok": 0, "bad": 0, "first_bad": "", "lat": []}

    def worker(j):
        c = Client(base, token)
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
            # Shaped and sized like Tern's contact.consent event (a contact view as data).
            at = now_rfc3339()
            payload = {
                "type": EVENT_TYPE,
                "created_at": at,
                "data": {"id": f"con_bench{j:02d}{i:08d}", "phone": f"+4477009{i % 100000:05d}", "name": None,
                         "consent": {"status": "opted_in" if i % 2 == 0 else "opted_out", "source": "bench",
                                     "updated_at": at},
                         "attributes": {}, "created_at": at, "updated_at": at},
            }
            t = time.perf_counter()
            try:
                status, body = c.call("POST", f"{API}/app/{app}/msg/?with_content=false",
                                      {"eventType": EVENT_TYPE, "payload": payload})
            except Exception as e:  # noqa: BLE001 — counted, reported once
                status, body = 0, str(e).encode()
            lat.append((time.perf_counter() - t) * 1000)
            with lock:
                if status == 202:
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


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "setup":
        base, token, receiver, n, kind = args[0], args[1], args[2].rstrip("/"), int(args[3]), args[4]
        loopback(receiver)
        c = Client(base, token)
        status, body = c.call("POST", f"{API}/app/", {"name": "bench"})
        if status != 201:
            sys.exit(f"POST /app/ answered {status}: {body[:300]!r}")
        app = json.loads(body)["id"]
        status, body = c.call("POST", f"{API}/event-type/", {"name": kind, "description": "bench"})
        if status not in (201, 409):
            sys.exit(f"POST /event-type/ answered {status}: {body[:300]!r}")
        for i in range(1, n + 1):
            status, body = c.call("POST", f"{API}/app/{app}/endpoint/",
                                  {"url": f"{receiver}/s/{i}", "eventTypes": [kind]})
            if status != 201:
                sys.exit(f"POST /endpoint/ answered {status}: {body[:300]!r}")
            ep = json.loads(body)["id"]
            status, body = c.call("GET", f"{API}/app/{app}/endpoint/{ep}/secret/", None)
            if status != 200 or not str(json.loads(body).get("key", "")).startswith("whsec_"):
                sys.exit(f"GET /endpoint/{ep}/secret/: {status} {body[:300]!r}")
        print(app)
    elif mode in ("pace", "burst"):
        base, token, app = args[0], args[1], args[2]
        if mode == "pace":
            rate, secs, clients = float(args[3]), float(args[4]), int(args[5])
            total = max(1, int(rate * secs))
            t0 = time.perf_counter() + 0.05
            schedule = [t0 + i / rate for i in range(total)]
        else:
            total, clients = int(args[3]), int(args[4])
            schedule = [0.0] * total
        result(*messages(base, token, app, schedule, clients))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
