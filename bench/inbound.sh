#!/usr/bin/env bash
# Inbound-path benchmark: signed network webhooks (`POST /webhooks/whatsapp`) into a release
# build of `tern serve`, on SQLite and on PostgreSQL, until the inbox worker has applied every
# one: customers matched by BSUID and phone (merges included), content stored, edits applied.
#
# Usage: bench/inbound.sh [posts, default 2000]
#   BENCH_BACKENDS="sqlite postgres"  backends to run (default both)
#   BENCH_BATCH=10          messages per webhook POST (the network batches up to ~1000)
#   BENCH_CONCURRENCY=16    concurrent POSTs
#   BENCH_CUSTOMERS=500     customers in the pool (a third each: phone, username only, both)
#   BENCH_SKIP_BUILD=0      1: use the binary already in CARGO_TARGET_DIR
#   BENCH_ANALYZE_EVERY=5   PostgreSQL: ANALYZE the fresh database every N seconds during the
#                           run, as a running server's autovacuum keeps statistics (0: never)
#
# Prints per backend: intake (POSTs answered 200 per second, latency p50/p99 of the answer),
# applied messages per second from the first POST until the inbox is empty, and the peak RSS
# of tern (VmHWM). Loopback only; bounded (300 s wait for the inbox at most).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
posts=${1:-2000}
backends=${BENCH_BACKENDS:-sqlite postgres}
batch=${BENCH_BATCH:-10}
conc=${BENCH_CONCURRENCY:-16}
customers=${BENCH_CUSTOMERS:-500}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target-bench}
tern="$CARGO_TARGET_DIR/release/tern"
PNID=109000000000002
APP_SECRET="bench-inbound-secret-$$"

command -v sqlite3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sqlite3 >/dev/null; }
for t in curl python3 psql; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done

tmp=$(mktemp -d /tmp/tern-bench-inbound.XXXXXX)
pids=()
pg_db=""
. "$root/bench/lib.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM


if [[ ${BENCH_SKIP_BUILD:-0} != 1 ]]; then
  echo "building tern (release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR) …"
  cargo build --release -p tern --manifest-path "$root/Cargo.toml" -q
else
  echo "not building: BENCH_SKIP_BUILD=1, $CARGO_TARGET_DIR/release/tern"
fi
"$root/scripts/services.sh" >/dev/null

for name in $backends; do
  dir="$tmp/$name"
  mkdir -p "$dir"
  case $name in
    sqlite)
      url="sqlite://$dir/tern.db"
      export BENCH_SQL_UNPROCESSED="sqlite3 -batch -noheader '$dir/tern.db' 'SELECT count(*) FROM network_inbox WHERE processed_at IS NULL'"
      sql() { sqlite3 -batch -noheader "$dir/tern.db" "$1"; }
      ;;
    postgres)
      pg_db="tern_bench_inbound_$$"
      psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE $pg_db" >/dev/null
      url="postgres://postgres@127.0.0.1:5432/$pg_db"
      export BENCH_SQL_UNPROCESSED="psql -h 127.0.0.1 -U postgres -d $pg_db -Atqc 'SELECT count(*) FROM network_inbox WHERE processed_at IS NULL'"
      sql() { psql -h 127.0.0.1 -U postgres -d "$pg_db" -Atq -c "$1"; }
      ;;
    *) echo "unknown backend $name" >&2; exit 2 ;;
  esac
  port=$(free_port)
  base="http://127.0.0.1:$port"
  unset TERN_REDIS_URL TERN_CONFIG
  export TERN_DATABASE_URL="$url" TERN_LISTEN="127.0.0.1:$port" TERN_PUBLIC_URL="$base" \
    TERN_GRAPH_URL="http://127.0.0.1:9" TERN_APP_SECRET="$APP_SECRET" TERN_VERIFY_TOKEN=bench \
    TERN_SECRET_KEY="bench-secret-key-0123456789abcdef0123456789" \
    TERN_MEDIA_STORE="file://$dir/media" TERN_LOG=warn
  org=$("$tern" admin org create --name bench --plan enterprise | json id)
  "$tern" admin number add --org "$org" --phone-number-id "$PNID" --display-phone-number +14155550100 \
    --waba-id waba --access-token token >/dev/null
  "$tern" serve >"$dir/tern.log" 2>&1 &
  tern_pid=$!
  pids+=("$tern_pid")
  for _ in $(seq 1 200); do curl -sf -o /dev/null "$base/readyz" && break; sleep 0.05; done

  echo
  echo "=== $name: $posts POSTs × $batch messages, $conc concurrent, $customers customers ==="
  # PostgreSQL's planner statistics during the run. The database is created empty just
  # before it, and autovacuum first analyzes a table about a minute after its inserts begin:
  # until then every index of `messages` and `contacts` is costed alike, and looking a
  # message up by wamid read all of the organisation's messages (an edit of the 12,000th
  # message took 270 ms). A running server has statistics, so by default the run analyzes
  # every BENCH_ANALYZE_EVERY seconds (0: never, as the bench did before 2026-11-28).
  analyzer=""
  if [[ $name == postgres && ${BENCH_ANALYZE_EVERY:-5} != 0 ]]; then
    while sleep "${BENCH_ANALYZE_EVERY:-5}"; do sql ANALYZE >/dev/null 2>&1 || true; done &
    analyzer=$!
    pids+=("$analyzer")
  fi
  result=$(python3 "$root/bench/inbound.py" "$base" "$APP_SECRET" "$PNID" "$posts" "$batch" "$conc" "$customers")
  [[ -z $analyzer ]] || { kill "$analyzer" 2>/dev/null || true; wait "$analyzer" 2>/dev/null || true; }
  echo "$result"
  contacts=$(sql "SELECT count(*) FROM contacts")
  stored=$(sql "SELECT count(*) FROM messages WHERE direction = 'inbound'")
  # (an older schema without edited_at says n/a: the script also measures earlier builds)
  edited=$(sql "SELECT count(*) FROM messages WHERE edited_at IS NOT NULL" 2>/dev/null || echo n/a)
  failed=$(sql "SELECT count(*) FROM network_inbox WHERE error IS NOT NULL")
  echo "contacts=$contacts (of $customers customers) inbound_stored=$stored edited=$edited inbox_errors=$failed peak_rss_mib=$(awk '/VmHWM/{printf "%.1f", $2/1024}' "/proc/$tern_pid/status")"
  kill -TERM "$tern_pid"
  wait "$tern_pid" 2>/dev/null || true
done
