#!/usr/bin/env bash
# The whole test suite, on SQLite and PostgreSQL (and Redis where used).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
export TERN_TEST_PG_URL=${TERN_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
export TERN_TEST_REDIS_URL=${TERN_TEST_REDIS_URL:-redis://127.0.0.1:6379}
cargo test --workspace --locked "$@"

# Third-party client check: pywa (pinned) drives the simulator binary that `cargo test` has just
# built and parses every webhook it sends. Skipped when arguments filter the cargo tests.
if [ $# -eq 0 ]; then
  if ! .venv/bin/python -c 'import importlib.metadata as m, pytest; assert m.version("pywa") == "4.5.0"' 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install -q "pywa==4.5.0" pytest
  fi
  tern_bin="${CARGO_TARGET_DIR:-target}/debug/tern"
  [ -x "$tern_bin" ] || cargo build -p tern --locked
  TERN_BIN="$tern_bin" timeout 300 .venv/bin/python -m pytest -q -p no:cacheprovider tests/pywa
fi
