"""An HTTPS receiver of event webhooks for the browser tests: a CA and a certificate for
127.0.0.1 made with Debian's ``openssl`` (tern trusts the CA: ``TERN_EXTRA_CA_FILE``), a
threaded server on a free loopback port that answers 204 (500 for a path in ``failing``, a
receiver that is down for a while) and keeps every request (path, headers, body, the status
answered) for the test to verify with the official Standard Webhooks library."""

from __future__ import annotations

import http.server
import pathlib
import socket
import ssl
import subprocess
import threading
import time


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_certs(d: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    ca_key, ca, key, csr, cert, ext = (
        d / "ca.key", d / "ca.pem", d / "leaf.key", d / "leaf.csr", d / "leaf.pem", d / "leaf.ext"
    )
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(ca_key), "-out", str(ca), "-days", "2", "-subj", "/CN=Tern test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                   "extendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
             "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return ca, cert, key


class Receiver:
    def __init__(self, workdir: pathlib.Path):
        self.ca_file, cert, key = make_certs(workdir)
        self.requests: list[dict] = []
        # Paths answered 500 until removed (the receiver recovers).
        self.failing: set[str] = set()
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the stdlib's name)
                n = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(n)
                with outer.lock:
                    status = 500 if self.path in outer.failing else 204
                    outer.requests.append(
                        {"path": self.path, "headers": dict(self.headers.items()), "body": body,
                         "status": status}
                    )
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def fail(self, path: str, failing: bool = True) -> None:
        """Answers 500 to ``path`` from now on (``failing=False``: 204 again)."""
        with self.lock:
            (self.failing.add if failing else self.failing.discard)(path)

    def wait_for(self, path: str, timeout: float = 15.0, status: int | None = None) -> dict:
        """The first request to ``path`` (answered ``status``, if given), waiting up to
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for r in self.requests:
                    if r["path"] == path and status in (None, r["status"]):
                        return r
            time.sleep(0.1)
        raise AssertionError(f"no request to {path} within {timeout}s")

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
