#!/usr/bin/env bash
# The app's pages on a full database: a release `tern serve` (with `tern simulator` as the
# network) whose organisation holds BENCH_MESSAGES messages (default 100,000, POSTed through
# the public API and dispatched), keys, subscriptions, members and audit entries; then each
# page is timed with a signed-in session (wrk -t1 -c4, bench/pages.lua).
#
# Usage: bench/app.sh [seconds per page, default 10]
#   BENCH_BACKENDS="sqlite postgres"   backends (default both)
#   BENCH_MESSAGES=100000              messages in the database before the pages are timed
#   BENCH_SKIP_BUILD=0                 1: use the release binary already built
# The pages are timed once the dispatcher has sent the backlog (nothing accepted is left).
# Reported per page: rps, p50/p99/max latency (ms), non-200 answers (must be 0); peak RSS of tern.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-10}
backends=${BENCH_BACKENDS:-sqlite postgres}
messages=${BENCH_MESSAGES:-100000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target-bench}
tern="$CARGO_TARGET_DIR/release/tern"
out="$root/bench/results"
PNID=109000000000001
WABA=209000000000001
DISPLAY=+14155550100
TOKEN=bench-access-token
CUSTOMER_PREFIX=1415556
APP_SECRET="bench-app-secret-$$"
VERIFY_TOKEN="bench-verify-$$"
API=/api/public/v1
PASSWORD="bench-pages-passphrase-$$"

for t in curl python3 psql wrk sqlite3; do command -v "$t" >/dev/null || { echo "$t is required (bench/send.sh installs wrk and sqlite3)" >&2; exit 1; }; done
tmp=$(mktemp -d /tmp/tern-bench-app.XXXXXX)
pids=()
pg_db=""
. "$root/bench/lib.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ ${BENCH_SKIP_BUILD:-0} == 1 ]]; then
  echo "not building: BENCH_SKIP_BUILD=1, $tern of $(date -ur "$tern" +%FT%TZ)"
else
  echo "building tern (release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR) …"
  cargo build --release -p tern --manifest-path "$root/Cargo.toml" -q
fi
mkdir -p "$out"
"$root/scripts/services.sh" >/dev/null
summary=()

run_backend() {
  local name=$1 url=$2 dir="$tmp/$1"
  mkdir -p "$dir"
  local sim_port tern_port
  sim_port=$(free_port)
  tern_port=$(free_port)
  local base="http://127.0.0.1:$tern_port" sim="http://127.0.0.1:$sim_port"
  case $name in
    sqlite) local dbfile=${url#sqlite://}; sql() { sqlite3 -batch -noheader "$dbfile" "$1"; } ;;
    postgres) sql() { psql -h 127.0.0.1 -U postgres -d "$pg_db" -Atq -c "$1"; } ;;
  esac
  echo
  echo "=== $name ==="
  "$tern" simulator --listen "127.0.0.1:$sim_port" --callback-url "$base/webhooks/whatsapp" \
    --app-secret "$APP_SECRET" --verify-token "$VERIFY_TOKEN" --seed 1 \
    --number "$PNID:$DISPLAY:$WABA:$TOKEN:1000000" --default-mps 1000000 \
    --sent-delay-ms 0 --delivered-delay-ms 0 --read-delay-ms 0 --no-window \
    --pair-burst 1000000000 --pair-period-ms 1 >"$dir/simulator.log" 2>&1 &
  local sim_pid=$!
  pids+=("$sim_pid")
  wait_http "$sim/_sim/health" simulator "$dir/simulator.log"
  unset TERN_REDIS_URL TERN_CONFIG TERN_RATE_LIMITS TERN_ALLOW_NETWORKS TERN_EXTRA_CA_FILE
  export TERN_DATABASE_URL="$url" TERN_LISTEN="127.0.0.1:$tern_port" TERN_PUBLIC_URL="$base" \
    TERN_GRAPH_URL="$sim" TERN_APP_SECRET="$APP_SECRET" TERN_VERIFY_TOKEN="$VERIFY_TOKEN" \
    TERN_SECRET_KEY="bench-secret-key-0123456789abcdef0123456789" \
    TERN_MEDIA_STORE="file://$dir/media" TERN_LOG=warn TERN_RATE_LIMITS=off

  local org member_json member invite_url key
  org=$("$tern" admin org create --name bench --plan enterprise | json id)
  "$tern" admin number add --org "$org" --phone-number-id "$PNID" --display-phone-number "$DISPLAY" \
    --waba-id "$WABA" --access-token "$TOKEN" --throughput-mps 1000 >/dev/null
  member_json=$("$tern" admin member add --org "$org" --email "owner@bench.test" --role owner)
  member=$(json id <<<"$member_json")
  invite_url=$(json invite_url <<<"$member_json")
  key=$("$tern" admin key create --org "$org" --member "$member" --name bench --preset full_access | json key)
  local i
  for i in $(seq 1 20); do
    "$tern" admin key create --org "$org" --member "$member" --name "key $i" --preset read_only >/dev/null
  done
  for i in $(seq 1 10); do
    "$tern" admin member add --org "$org" --email "dev$i@bench.test" --role developer >/dev/null
  done

  "$tern" serve >"$dir/tern.log" 2>&1 &
  local tern_pid=$!
  pids+=("$tern_pid")
  wait_http "$base/readyz" "tern serve" "$dir/tern.log"
  local cookie
  cookie=$(python3 "$root/bench/app.py" accept "$base" "$invite_url" "$PASSWORD")
  for i in $(seq 1 10); do
    curl -sf -X POST "$base$API/webhook-subscriptions" -H "Authorization: Bearer $key" \
      -H 'Content-Type: application/json' \
      -d "{\"url\":\"https://receiver$i.example.com/hook\",\"events\":[\"message.status\"]}" >/dev/null
  done

  # Messages: one customer writes in (the window opens), then POSTs until the count is reached.
  curl -sf -X POST "$sim/_sim/inbound" -H 'Content-Type: application/json' \
    -d "{\"phone_number_id\":\"$PNID\",\"from\":\"${CUSTOMER_PREFIX}0000\",\"type\":\"text\",\"text\":{\"body\":\"hi\"}}" >/dev/null
  local have=0 round=0
  echo "-- seeding $messages messages through POST /messages"
  while :; do
    have=$(sql "SELECT count(*) FROM messages")
    [[ $have -ge $messages ]] && break
    round=$((round + 1))
    [[ $round -le 60 ]] || { echo "only $have messages after 60 rounds" >&2; exit 1; }
    wrk -t2 -c32 -d10s -s "$root/bench/send.lua" "$base$API/messages" -- "$key" "seed$$-$round" 1 "+$CUSTOMER_PREFIX" >/dev/null
  done
  echo "   $have messages"
  # The dispatcher sends the backlog first: pages are timed on a settled database, not beside
  # a thousand sends a second.
  local left i
  for i in $(seq 1 600); do
    left=$(sql "SELECT count(*) FROM messages WHERE status IN ('accepted', 'sending')")
    [[ $left -eq 0 ]] && break
    sleep 1
  done
  echo "   dispatch backlog after waiting: $left"

  local page res
  for page in /app /app/keys /app/webhooks /app/members /app/audit /app/sessions; do
    wrk -t1 -c4 -d"${secs}s" --latency -s "$root/bench/pages.lua" "$base$page" -- "$cookie" >"$dir/page.txt" 2>&1 ||
      { cat "$dir/page.txt" >&2; exit 1; }
    res=$(grep '^RESULT' "$dir/page.txt")
    grep '^FIRST_UNEXPECTED' "$dir/page.txt" || true
    printf '   %-16s %s\n' "$page" "$res"
    summary+=("$name|$page|$res")
  done
  echo "   peak RSS of tern: $(hwm_mib "$tern_pid") MiB"
  kill -TERM "$tern_pid" "$sim_pid" 2>/dev/null || true
  wait "$tern_pid" "$sim_pid" 2>/dev/null || true
  pids=()
}

run_backends tern_bench_app
echo
echo "=== summary: $(nproc) cores, $messages messages, wrk -t1 -c4 -d${secs}s per page, $(date -u +%FT%TZ) ==="
failed=0
for row in "${summary[@]}"; do
  IFS='|' read -r n page res <<<"$row"
  printf '%-9s %-16s %s\n' "$n" "$page" "$res"
  [[ $res == *"non_expected=0"* ]] || failed=1
done
exit "$failed"
