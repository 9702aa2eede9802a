#!/usr/bin/env bash
# The message explorer on 1,000,000 messages (PostgreSQL): a release `tern serve` whose
# organisation holds BENCH_MESSAGES messages over BENCH_CONTACTS contacts on two numbers with
# one campaign (bench/explorer.sql writes them straight into the database), then each search
# of /app/messages is timed with a signed-in session (wrk -t1 -c4, bench/pages.lua) and the
# store's statements are shown with EXPLAIN ANALYZE.
#
# Usage: bench/explorer.sh [seconds per search, default 10]
#   BENCH_MESSAGES=1000000 BENCH_CONTACTS=50000   the data set
#   BENCH_SKIP_BUILD=0                            1: use the release binary already built
# Reported per search: rps, p50/p99/max latency (ms), non-200 answers (must be 0); the
# target is p99 ≤ 100 ms for each. The plans are written to bench/results/explorer-plans.txt.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-10}
messages=${BENCH_MESSAGES:-1000000}
contacts=${BENCH_CONTACTS:-50000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target-bench}
tern="$CARGO_TARGET_DIR/release/tern"
out="$root/bench/results"
PN1=109000000000001
PN2=109000000000002
PASSWORD="bench-explorer-passphrase-$$"

for t in curl python3 psql wrk; do command -v "$t" >/dev/null || { echo "$t is required (bench/send.sh installs wrk)" >&2; exit 1; }; done
tmp=$(mktemp -d /tmp/tern-bench-explorer.XXXXXX)
pids=()
pg_db=""
. "$root/bench/lib.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ ${BENCH_SKIP_BUILD:-0} == 1 ]]; then
  echo "not building: BENCH_SKIP_BUILD=1, $tern of $(date -ur "$tern" +%FT%TZ)"
else
  echo "building tern (release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR) …"
  cargo build --release -p tern --bins --manifest-path "$root/Cargo.toml" -q
fi
mkdir -p "$out"
"$root/scripts/services.sh" >/dev/null
summary=()
plans="$out/explorer-plans.txt"

run_backend() {
  local name=$1 url=$2 dir="$tmp/$1"
  [[ $name == postgres ]] || { echo "the explorer's data set is PostgreSQL only" >&2; exit 2; }
  mkdir -p "$dir"
  local port base
  port=$(free_port)
  base="http://127.0.0.1:$port"
  sql() { psql -h 127.0.0.1 -U postgres -d "$pg_db" -Atq -c "$1"; }
  unset TERN_REDIS_URL TERN_CONFIG TERN_RATE_LIMITS TERN_ALLOW_NETWORKS TERN_EXTRA_CA_FILE
  export TERN_DATABASE_URL="$url" TERN_LISTEN="127.0.0.1:$port" TERN_PUBLIC_URL="$base" \
    TERN_GRAPH_URL="http://127.0.0.1:9" TERN_APP_SECRET="bench-app-secret-$$" TERN_VERIFY_TOKEN="bench-verify-$$" \
    TERN_SECRET_KEY="bench-secret-key-0123456789abcdef0123456789" \
    TERN_MEDIA_STORE="file://$dir/media" TERN_LOG=warn TERN_RATE_LIMITS=off

  local org member_json invite_url
  org=$("$tern" admin org create --name bench --plan enterprise | json id)
  for pn in "$PN1:+14155550100" "$PN2:+14155550101"; do
    "$tern" admin number add --org "$org" --phone-number-id "${pn%%:*}" --display-phone-number "${pn#*:}" \
      --waba-id 209000000000001 --access-token bench-token >/dev/null
  done
  member_json=$("$tern" admin member add --org "$org" --email "owner@bench.test" --role owner)
  invite_url=$(json invite_url <<<"$member_json")

  echo "-- writing $messages messages over $contacts contacts (bench/explorer.sql)"
  local t0=$SECONDS
  psql -h 127.0.0.1 -U postgres -d "$pg_db" -q -v org="$org" -v pn1="$PN1" -v pn2="$PN2" \
    -v messages="$messages" -v contacts="$contacts" -f "$root/bench/explorer.sql" >/dev/null
  echo "   $(sql "SELECT count(*) FROM messages") messages in $((SECONDS - t0)) s"

  "$tern" serve >"$dir/tern.log" 2>&1 &
  local tern_pid=$!
  pids+=("$tern_pid")
  wait_http "$base/readyz" "tern serve" "$dir/tern.log"
  local cookie
  cookie=$(python3 "$root/bench/app.py" accept "$base" "$invite_url" "$PASSWORD")

  # Terms picked from the data set: a customer, a message, a BSUID and username customer.
  local phone wamid id campaign bsuid uname until_t
  phone="%2B$(sql "SELECT wa_id FROM contacts WHERE org_id = '$org' ORDER BY id LIMIT 1 OFFSET 777")"
  wamid=$(sql "SELECT wamid FROM messages WHERE wamid = 'wamid.bench$((messages / 3))'")
  id=$(sql "SELECT id FROM messages WHERE wamid = 'wamid.bench$((messages / 2))'")
  campaign=$(sql "SELECT id FROM campaigns WHERE org_id = '$org' LIMIT 1")
  bsuid=$(sql "SELECT user_id FROM contacts WHERE org_id = '$org' AND user_id IS NOT NULL LIMIT 1")
  uname="%40$(sql "SELECT username FROM contacts WHERE org_id = '$org' AND username IS NOT NULL LIMIT 1 OFFSET 5")"
  until_t=$(date -u -d '-15 days' +%Y-%m-%dT%H:%M)

  local label query res
  while IFS='|' read -r label query; do
    wrk -t1 -c4 -d"${secs}s" --latency -s "$root/bench/pages.lua" "$base/app/messages$query" -- "$cookie" >"$dir/page.txt" 2>&1 ||
      { cat "$dir/page.txt" >&2; exit 1; }
    res=$(grep '^RESULT' "$dir/page.txt")
    grep '^FIRST_UNEXPECTED' "$dir/page.txt" || true
    printf '   %-22s %s\n' "$label" "$res"
    summary+=("$label|$res")
  done <<EOF
unfiltered|
by phone|?q=$phone
by wamid|?q=$wamid
by message id|?q=$id
by BSUID|?q=$bsuid
by username|?q=$uname
status failed|?status=failed
direction inbound|?direction=inbound
number|?number=$PN2
campaign|?campaign=$campaign
until 15 days ago|?until=$until_t
phone + status read|?q=$phone&status=read
EOF
  echo "   peak RSS of tern: $(hwm_mib "$tern_pid") MiB"

  # The store's statements (crates/store/src/explorer.rs) as the explorer sends them.
  local cols="id, org_id, conversation_id, contact_id, phone_number_id, direction, type, status, template_name, template_language, text, media_id, wamid, request, campaign_id, created_at, sent_at, delivered_at, read_at, failed_at, failure_code, failure, updated_at, content, reply_to, referral, edited_at, revoked_at"
  local conv
  conv=$(sql "SELECT id FROM conversations WHERE org_id = '$org' AND contact_id IN (SELECT id FROM contacts WHERE org_id = '$org' AND wa_id = '${phone#%2B}')")
  {
    echo "# EXPLAIN ANALYZE of the explorer's statements, $messages messages, $(date -u +%FT%TZ)"
    local q
    for q in \
      "SELECT $cols FROM messages WHERE org_id = '$org' ORDER BY id DESC LIMIT 51" \
      "SELECT $cols FROM messages WHERE org_id = '$org' AND status = 'failed' ORDER BY id DESC LIMIT 51" \
      "SELECT $cols FROM messages WHERE org_id = '$org' AND campaign_id = '$campaign' ORDER BY id DESC LIMIT 51" \
      "SELECT $cols FROM messages WHERE org_id = '$org' AND phone_number_id = '$PN2' ORDER BY id DESC LIMIT 51" \
      "SELECT id FROM contacts WHERE org_id = '$org' AND wa_id = '${phone#%2B}' LIMIT 50" \
      "SELECT id FROM contacts WHERE org_id = '$org' AND username IS NOT NULL AND LOWER(username) = LOWER('${uname#%40}') LIMIT 50" \
      "SELECT $cols FROM messages WHERE conversation_id = '$conv' AND org_id = '$org' ORDER BY id DESC LIMIT 51" \
      "SELECT id FROM messages WHERE wamid = '$wamid' AND org_id = '$org'"; do
      echo
      echo "## $q" | cut -c1-300
      psql -h 127.0.0.1 -U postgres -d "$pg_db" -Atq -c "EXPLAIN (ANALYZE, BUFFERS) $q"
    done
  } >"$plans"
  echo "   plans: $plans"
  kill -TERM "$tern_pid" 2>/dev/null || true
  wait "$tern_pid" 2>/dev/null || true
  pids=()
}

backends=postgres
run_backends tern_bench_explorer
echo
echo "=== summary: $(nproc) cores, $messages messages, $contacts contacts, wrk -t1 -c4 -d${secs}s per search, $(date -u +%FT%TZ) ==="
failed=0
for row in "${summary[@]}"; do
  IFS='|' read -r label res <<<"$row"
  printf '%-22s %s\n' "$label" "$res"
  [[ $res == *"non_expected=0"* ]] || failed=1
done
exit "$failed"
