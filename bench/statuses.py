"""Status-path load: signed network status webhooks into `tern serve` for messages already
`sent`, then wait until the inbox worker has applied every one.

Each message gets `delivered` then `read`, posted BATCH statuses per POST (1 is how the
network mostly sends them; it batches up to ~1,000 under load) by CONCURRENCY clients, so
some `read` reports arrive before their `delivered` (applied all the same: it fills
`delivered_at`). With BENCH_BSUID=1 (the default) each status also names its customer's BSUID,
as the network's do since 2026. Prints one line: `RESULT key=value …`.

Usage: statuses.py BASE_URL APP_SECRET PNID MESSAGES BATCH CONCURRENCY
Reads the unprocessed-inbox count with the command in $BENCH_SQL_UNPROCESSED (shell).
"""

import hashlib
import hmac
import http.client
import json
import math
import os
import subprocess
import sys
import threading
import time
import urllib.parse

base, secret, pnid = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
messages, batch, conc = (int(x) for x in sys.argv[4:7])
url = urllib.parse.urlparse(base)
now = int(time.time())
# Message n went to customer n mod BENCH_STATUS_CONTACTS (as statuses.sh writes them).
contacts = int(os.environ.get("BENCH_STATUS_CONTACTS", "1000"))
bsuid = os.environ.get("BENCH_BSUID", "1") == "1"

# Every status in posting order: message k's delivered, then (a little later) its read.
reports = []
for k in range(0, messages, 50):
    group = range(k, min(k + 50, messages))
    reports += [(i, "delivered") for i in group]
    reports += [(i, "read") for i in group]


def body(chunk):
    statuses = [{"id": f"wamid.st.{i}", "status": s, "timestamp": str(now + (1 if s == "read" else 0)),
                 "recipient_id": str(447000000000 + i % contacts),
                 "pricing": {"billable": True, "pricing_model": "PMP", "category": "utility", "type": "regular"}}
                for i, s in chunk]
    if bsuid:
        for st, (i, _) in zip(statuses, chunk):
            st["recipient_user_id"] = f"US.bench.{i % contacts}"
    doc = {"object": "whatsapp_business_account", "entry": [{"id": "waba", "changes": [{"field": "messages", "value": {
        "messaging_product": "whatsapp", "metadata": {"display_phone_number": "14155550100", "phone_number_id": pnid},
        "statuses": statuses}}]}]}
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return raw, "sha256=" + hmac.new(secret, raw, hashlib.sha256).hexdigest()


bodies = [body(reports[i:i + batch]) for i in range(0, len(reports), batch)]
latencies, errors, lock = [], [0], threading.Lock()
next_i = [0]


def worker():
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    while True:
        with lock:
            i = next_i[0]
            next_i[0] += 1
        if i >= len(bodies):
            break
        raw, sig = bodies[i]
        t = time.perf_counter()
        conn.request("POST", "/webhooks/whatsapp", raw, {"Content-Type": "application/json", "X-Hub-Signature-256": sig})
        r = conn.getresponse()
        r.read()
        dt = (time.perf_counter() - t) * 1000
        with lock:
            latencies.append(dt)
            if r.status != 200:
                errors[0] += 1


def unprocessed():
    out = subprocess.run(["bash", "-c", os.environ["BENCH_SQL_UNPROCESSED"]], capture_output=True, text=True)
    return int(out.stdout.strip() or "-1")


start = time.perf_counter()
threads = [threading.Thread(target=worker) for _ in range(conc)]
for t in threads:
    t.start()
for t in threads:
    t.join()
posted = time.perf_counter()
deadline = posted + 300
while unprocessed() != 0 and time.perf_counter() < deadline:
    time.sleep(0.05)
done = time.perf_counter()
left = unprocessed()

lat = sorted(latencies)
rank = lambda p: lat[max(0, math.ceil(p / 100 * len(lat)) - 1)]
print(f"RESULT posts={len(bodies)} statuses={len(reports)} errors={errors[0]} left={left} "
      f"intake_rps={len(bodies) / (posted - start):.0f} intake_p50_ms={rank(50):.1f} intake_p99_ms={rank(99):.1f} "
      f"applied_statuses_per_s={len(reports) / (done - start):.0f} drain_s={done - start:.2f}")
