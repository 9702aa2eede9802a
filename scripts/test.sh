#!/usr/bin/env bash
# The whole test suite, on SQLite and PostgreSQL (and Redis where used), with media on a
# directory and on a real S3-compatible server (moto, on loopback).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
export TERN_TEST_PG_URL=${TERN_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
export TERN_TEST_REDIS_URL=${TERN_TEST_REDIS_URL:-redis://127.0.0.1:6379}

# Python tools the tests use: pywa (the third-party client check), moto (the S3 server) and
# standardwebhooks (the official verifier of event-webhook signatures).
# Playwright (pinned) drives the app's browser tests in Debian's Chromium, never a browser of
# its own (`playwright install` is not run).
if ! .venv/bin/python -c 'import importlib.metadata as m, pytest; assert m.version("pywa") == "4.5.0"; assert m.version("moto") == "5.1.18"; assert m.version("standardwebhooks") == "1.1.0"; assert m.version("playwright") == "1.65.2"; import flask' 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install -q "pywa==4.5.0" pytest "moto[server]==5.1.18" "standardwebhooks==1.1.0" "playwright==1.65.2"
fi
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi

# S3 for the media tests: a moto server of our own, unless one is given.
if [ -z "${TERN_TEST_S3_URL:-}" ]; then
  s3_port=5123
  while (exec 3<>/dev/tcp/127.0.0.1/$s3_port) 2>/dev/null; do s3_port=$((s3_port + 1)); done
  .venv/bin/moto_server -H 127.0.0.1 -p "$s3_port" >/tmp/tern-moto.log 2>&1 &
  moto_pid=$!
  trap 'kill $moto_pid 2>/dev/null || true' EXIT
  export TERN_TEST_S3_URL="http://127.0.0.1:$s3_port"
  for _ in $(seq 1 100); do
    (exec 3<>/dev/tcp/127.0.0.1/$s3_port) 2>/dev/null && break
    sleep 0.1
  done
fi

cargo test --workspace --locked "$@"

# Client checks, skipped when arguments filter the cargo tests. pywa (pinned) drives the
# simulator binary that `cargo test` has just built and parses every webhook it sends.
if [ $# -eq 0 ]; then
  tern_bin="${CARGO_TARGET_DIR:-target}/debug/tern"
  [ -x "$tern_bin" ] || cargo build -p tern --locked
  TERN_BIN="$tern_bin" timeout 300 .venv/bin/python -m pytest -q -p no:cacheprovider tests/pywa
  # The app in a real browser (Debian's Chromium through Playwright) against tern serve.
  TERN_BIN="$tern_bin" timeout 300 .venv/bin/python -m pytest -q -p no:cacheprovider tests/browser
  # Typed clients generated from the served OpenAPI document (openapi-python-client,
  # openapi-typescript + openapi-fetch), type-checked strictly and run against tern serve.
  timeout 600 scripts/clients.sh "$tern_bin"
fi
