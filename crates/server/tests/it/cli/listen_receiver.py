"""The local receiver of the `tern listen` tests: a plain HTTP server on a free loopback
port that verifies every request with the official Standard Webhooks library
(``standardwebhooks``) and the secret given as its argument, answers 204 (400 when the
signature does not verify), and prints one JSON line per request (its ``webhook-id``, the
event's type and id from the body, the verdict). Its first line is ``PORT <n>``."""

import http.server
import json
import sys

from standardwebhooks.webhooks import Webhook

hook = Webhook(sys.argv[1])


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (the stdlib's name)
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        try:
            hook.verify(body, {k.lower(): v for k, v in self.headers.items()})
            ok = True
        except Exception:  # noqa: BLE001 (any failure is a refusal)
            ok = False
        event = json.loads(body) if ok else {}
        print(json.dumps({"webhook_id": self.headers.get("webhook-id"), "ok": ok,
                          "id": event.get("id"), "type": event.get("type")}), flush=True)
        self.send_response(204 if ok else 400)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"PORT {server.server_address[1]}", flush=True)
server.serve_forever()
