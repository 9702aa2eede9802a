#!/usr/bin/env bash
# Status-path benchmark: signed network status webhooks (`POST /webhooks/whatsapp`) into a
# release build of `tern serve`, on SQLite and on PostgreSQL, for BENCH_MESSAGES outbound
# messages already `sent` (written with SQL before tern starts), until the inbox worker has
# applied every report (each message: `delivered`, then `read`).
#
# Usage: bench/statuses.sh [messages, default 20000]
#   BENCH_BACKENDS="sqlite postgres"  backends to run (default both)
#   BENCH_BATCH=1           statuses per webhook POST (1: as the network mostly sends them)
#   BENCH_CONCURRENCY=16    concurrent POSTs
#   BENCH_SUBS=0            N > 0: N subscriptions to message.status exist (to a closed port:
#                           events and their deliveries are written, the sends fail)
#   BENCH_CONTACTS=1000     customers the messages go to (message n to customer n mod this)
#   BENCH_BSUID=1           1: each status names its customer's BSUID too (as the network
#                           does since 2026; the contacts hold phones only, so each
#                           customer's first status teaches Tern its BSUID); 0: phone only
#   BENCH_SKIP_BUILD=0      1: use the binary already in CARGO_TARGET_DIR
#
# Prints per backend: intake (POSTs answered 200 per second, p50/p99 of the answer), applied
# statuses per second from the first POST until the inbox is empty, the messages left short
# of `read` (must be 0), and the peak RSS of tern (VmHWM). Loopback only; bounded.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
messages=${1:-20000}
backends=${BENCH_BACKENDS:-sqlite postgres}
batch=${BENCH_BATCH:-1}
conc=${BENCH_CONCURRENCY:-16}
subs=${BENCH_SUBS:-0}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target-bench}
tern="$CARGO_TARGET_DIR/release/tern"
PNID=109000000000003
APP_SECRET="bench-status-secret-$$"
contacts=${BENCH_CONTACTS:-1000}
export BENCH_STATUS_CONTACTS=$contacts BENCH_BSUID=${BENCH_BSUID:-1}

command -v sqlite3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sqlite3 >/dev/null; }
for t in curl python3 psql; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done

tmp=$(mktemp -d /tmp/tern-bench-statuses.XXXXXX)
pids=()
pg_db=""
. "$root/bench/lib.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ ${BENCH_SKIP_BUILD:-0} != 1 ]]; then
  echo "building tern (release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR) …"
  cargo build --release -p tern --manifest-path "$root/Cargo.toml" -q
fi
"$root/scripts/services.sh" >/dev/null
now=$(python3 -c 'import time; print(int(time.time()*1000))')

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
      pg_db="tern_bench_statuses_$$"
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
    TERN_MEDIA_STORE="file://$dir/media" TERN_LOG=warn TERN_ALLOW_NETWORKS=127.0.0.1/32
  org=$("$tern" admin org create --name bench --plan enterprise | json id)
  "$tern" admin number add --org "$org" --phone-number-id "$PNID" --display-phone-number +14155550100 \
    --waba-id waba --access-token token >/dev/null
  if [[ $subs -gt 0 ]]; then
    member=$("$tern" admin member add --org "$org" --email "owner@bench.test" --role owner | json id)
    key=$("$tern" admin key create --org "$org" --member "$member" --name bench --preset full_access | json key)
  fi
  # The messages, as the dispatcher leaves them: `sent` with a wamid. Their ids ascend with
  # the order their statuses are posted in, as Tern's time-ordered ids (UUID v7) do.
  case $name in
    sqlite)
      o="X'${org//-/}'"
      sql "WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < $contacts - 1)
           INSERT INTO contacts (id, org_id, wa_id, name, custom_fields, consent_status, created_at, updated_at)
           SELECT randomblob(16), $o, CAST(447000000000 + n AS TEXT), 'C' || n, '{}', 'unknown', $now, $now FROM g;
           INSERT INTO conversations (id, org_id, contact_id, phone_number_id, last_message_at, created_at)
           SELECT randomblob(16), org_id, id, '$PNID', $now, $now FROM contacts;
           WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < $messages - 1)
           INSERT INTO messages (id, org_id, conversation_id, contact_id, phone_number_id, direction, type, status, text, wamid, created_at, sent_at, updated_at)
           SELECT CAST(printf('%016d', n) AS BLOB), c.org_id, v.id, c.id, '$PNID', 'outbound', 'text', 'sent', 'hello', 'wamid.st.' || n, $now, $now, $now
           FROM g JOIN contacts c ON c.wa_id = CAST(447000000000 + n % $contacts AS TEXT) JOIN conversations v ON v.contact_id = c.id;"
      ;;
    postgres)
      o="'$org'"
      sql "INSERT INTO contacts (id, org_id, wa_id, name, custom_fields, consent_status, created_at, updated_at)
           SELECT gen_random_uuid(), $o, (447000000000 + g)::text, 'C' || g, '{}', 'unknown', $now, $now FROM generate_series(0, $contacts - 1) g;
           INSERT INTO conversations (id, org_id, contact_id, phone_number_id, last_message_at, created_at)
           SELECT gen_random_uuid(), org_id, id, '$PNID', $now, $now FROM contacts;
           INSERT INTO messages (id, org_id, conversation_id, contact_id, phone_number_id, direction, type, status, text, wamid, created_at, sent_at, updated_at)
           SELECT lpad(to_hex(g), 32, '0')::uuid, c.org_id, v.id, c.id, '$PNID', 'outbound', 'text', 'sent', 'hello', 'wamid.st.' || g, $now, $now, $now
           FROM generate_series(0, $messages - 1) g JOIN contacts c ON c.wa_id = (447000000000 + g % $contacts)::text JOIN conversations v ON v.contact_id = c.id;
           ANALYZE;"
      ;;
  esac
  "$tern" serve >"$dir/tern.log" 2>&1 &
  tern_pid=$!
  pids+=("$tern_pid")
  wait_http "$base/readyz" "tern serve" "$dir/tern.log"
  for i in $(seq 1 "$subs"); do
    # A receiver that is not there: each event is written and its delivery attempted.
    curl -sf -X POST "$base/api/public/v1/webhooks" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
      -d "{\"url\":\"http://127.0.0.1:9/hook$i\",\"events\":[\"message.status\"]}" >/dev/null
  done

  echo
  echo "=== $name: $messages messages to $contacts customers × 2 statuses, $batch a POST, $conc concurrent, BSUIDs ${BENCH_BSUID}, $subs subscriptions ==="
  result=$(python3 "$root/bench/statuses.py" "$base" "$APP_SECRET" "$PNID" "$messages" "$batch" "$conc")
  echo "$result"
  short=$(sql "SELECT count(*) FROM messages WHERE status <> 'read'")
  echo "not_read=$short peak_rss_mib=$(hwm_mib "$tern_pid")"
  kill -TERM "$tern_pid"
  wait "$tern_pid" 2>/dev/null || true
  if [[ $name == postgres ]]; then
    psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" >/dev/null
    pg_db=""
  fi
done
