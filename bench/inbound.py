"""Inbound-path load: signed network webhooks into `tern serve`, then wait until the inbox
worker has applied every one.

Each POST is one `messages` notification with BATCH messages from a pool of customers of
three kinds — phone only, username only (BSUID, no phone), and both (a customer first seen
by BSUID whose phone shows up later: a merge the first time) — of mixed types (text,
location, interactive reply, reaction, image, and edits of earlier messages), as the
network sends them in 2026. Prints one line: `RESULT key=value …`.

Usage: inbound.py BASE_URL APP_SECRET PNID POSTS BATCH CONCURRENCY CUSTOMERS
Reads the unprocessed-inbox count with the command in $BENCH_SQL_UNPROCESSED (shell).
"""

import hashlib
import hmac
import json
import math
import os
import subprocess
import sys
import threading
import time
import http.client
import urllib.parse

base, secret, pnid = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
posts, batch, conc, customers = (int(x) for x in sys.argv[4:8])
url = urllib.parse.urlparse(base)


def customer(i):
    """(message sender fields, contacts[] entry) of customer i."""
    bsuid = f"US.{7000000000000000000 + i}"
    phone = f"1415557{i:04d}"
    kind = i % 3
    if kind == 0:  # phone only (as before 2026), BSUID alongside since April 2026
        return {"from": phone, "from_user_id": bsuid}, {"wa_id": phone, "user_id": bsuid, "profile": {"name": f"P{i}"}}
    if kind == 1:  # username only: no phone
        return {"from_user_id": bsuid}, {"user_id": bsuid, "profile": {"name": f"U{i}", "username": f"user{i}"}}
    return {"from": phone, "from_user_id": bsuid}, {"wa_id": phone, "user_id": bsuid, "profile": {"name": f"B{i}"}}


def body(n):
    now = str(int(time.time()))
    msgs, contacts = [], []
    for j in range(batch):
        k = n * batch + j
        i = k % customers
        sender, contact = customer(i)
        wamid = f"wamid.bench.{k}"
        kind = k % 6
        m = {"id": wamid, "timestamp": now, **sender}
        if kind == 0:
            m.update(type="text", text={"body": f"message {k}"})
        elif kind == 1:
            m.update(type="location", location={"latitude": "51.5", "longitude": "-0.12", "name": "Office"})
        elif kind == 2:
            m.update(type="interactive", interactive={"type": "button_reply", "button_reply": {"id": "y", "title": "Yes"}})
        elif kind == 3:
            m.update(type="reaction", reaction={"message_id": f"wamid.bench.{k - 3}", "emoji": "👍"})
        elif kind == 4:
            m.update(type="image", image={"id": "1", "mime_type": "image/jpeg", "sha256": "x", "caption": "c"})
        else:
            m.update(type="edit", edit={"original_message_id": f"wamid.bench.{k - 5}",
                                        "message": {"type": "text", "text": {"body": f"edited {k}"}}})
        msgs.append(m)
        contacts.append(contact)
    doc = {"object": "whatsapp_business_account", "entry": [{"id": "waba", "changes": [{"field": "messages", "value": {
        "messaging_product": "whatsapp", "metadata": {"display_phone_number": "14155550100", "phone_number_id": pnid},
        "contacts": contacts, "messages": msgs}}]}]}
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return raw, "sha256=" + hmac.new(secret, raw, hashlib.sha256).hexdigest()


bodies = [body(n) for n in range(posts)]
latencies, errors, lock = [], [0], threading.Lock()
next_i = [0]


def worker():
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    while True:
        with lock:
            i = next_i[0]
            next_i[0] += 1
        if i >= posts:
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
print(f"RESULT posts={posts} messages={posts * batch} errors={errors[0]} left={left} "
      f"intake_rps={posts / (posted - start):.0f} intake_p50_ms={rank(50):.1f} intake_p99_ms={rank(99):.1f} "
      f"applied_msgs_per_s={posts * batch / (done - start):.0f} drain_s={done - start:.2f}")
