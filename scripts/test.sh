#!/usr/bin/env bash
# The whole test suite, on SQLite and PostgreSQL (and Redis where used).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
export TERN_TEST_PG_URL=${TERN_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
export TERN_TEST_REDIS_URL=${TERN_TEST_REDIS_URL:-redis://127.0.0.1:6379}
cargo test --workspace --locked "$@"
