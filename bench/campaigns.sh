#!/usr/bin/env bash
# Campaign benchmark: a release `tern serve` against `tern simulator`, on SQLite and
# PostgreSQL, with BENCH_CONTACTS contacts tagged `bench`.
#
# Usage: bench/campaigns.sh [seconds of fan-out measured, default 30]
#   BENCH_BACKENDS="sqlite postgres"  backends to run (default both)
#   BENCH_CONTACTS=100000             contacts in the audience (inserted with SQL before tern starts)
#   BENCH_TERN_MPS=1000               the number's throughput in Tern (the campaign's pace)
#   BENCH_POST=0                      1: while the campaign runs, wrk -t2 -c32 POSTs API sends
#                                     (template messages) on the same number for the measured
#                                     time; reports both rates (the priority lane and the
#                                     dispatcher's own capacity at work)
#   BENCH_BATCH_MS=50                 the simulator collects status webhooks this long into one
#                                     POST (at most 1,000), as the network batches under load;
#                                     0: one POST per status
#   BENCH_STATUSES=1                  0: the simulator sends no status webhooks (the campaign
#                                     engine and the dispatcher alone; a message counts once sent)
#   BENCH_SKIP_BUILD=0                1: use the binaries already in CARGO_TARGET_DIR
#   BENCH_TERN_WRAP=""                a command that runs `tern serve`, e.g. "heaptrack -o FILE"
#                                     with a build of `--features heap-profile` (the system
#                                     allocator, whose calls heaptrack sees): a heap profile
#                                     of the run (RSS and rates are then the profiler's)
#
# Per backend:
#   resolve  POST /campaigns/{id}/resolve over the whole audience, timed by the client
#            (wall ms, one request); the recipients written are cross-checked.
#   fan-out  launch, then GET /campaigns/{id}/progress every second; the rate is the messages
#            that left the queue (sent, delivered, read or failed) per second between second 3
#            and the end of the window (the ramp-up excluded); target within 2 % of the tier.
#            Also: the accepted → sent latency of the campaign's messages (p50/p99 from the
#            database); with BENCH_POST=1 also how many API sends went out and the number's
#            whole rate (API and campaign sends leaving the queue, from tern's /metrics).
#   lag      once the inbox is empty (60 s at most): the status lag of every network status
#            report the run applied (its timeline entry, kind `status`): applied (the entry's
#            UUID v7 time) − when the simulator emitted the status (`status_at_ms` of
#            GET /_sim/messages, ms), p50/p99/max. Also applied − the network's timestamp
#            (whole seconds, the simulator's too, so up to 1 s high), and applied − received
#            (the webhook's arrival at tern, ms), tern's own share.
#   RSS      VmHWM of the tern process (peak resident set) at the end.
# Loopback only; every run is bounded. Raw outputs go to bench/results/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-30}
backends=${BENCH_BACKENDS:-sqlite postgres}
contacts=${BENCH_CONTACTS:-100000}
tern_mps=${BENCH_TERN_MPS:-1000}
post=${BENCH_POST:-0}
batch_ms=${BENCH_BATCH_MS:-50}
statuses=${BENCH_STATUSES:-1}
[[ $contacts =~ ^[0-9]+$ && $contacts -ge 1 && $contacts -le 1000000 ]] || { echo "BENCH_CONTACTS must be 1 to 1000000" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target-bench}
tern="$CARGO_TARGET_DIR/release/tern"
out="$root/bench/results"

PNID=109000000000002
WABA=209000000000002
DISPLAY=+14155550100
TOKEN=bench-access-token
CUSTOMER_PREFIX=1415557 # API-send customers (write in first): 1415557 + 4 digits
APP_SECRET="bench-app-secret-$$"
VERIFY_TOKEN="bench-verify-$$"
API=/api/public/v1

for t in curl python3 psql sqlite3; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done
[[ $post == 0 ]] || command -v wrk >/dev/null || { echo "wrk is required for BENCH_POST=1" >&2; exit 1; }

tmp=$(mktemp -d /tmp/tern-bench-campaigns.XXXXXX)
pids=()
pg_db=""
. "$root/bench/lib.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { python3 -c 'import time; print(int(time.time()*1000))'; }

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
  local name=$1 url=$2
  local dir="$tmp/$name"
  mkdir -p "$dir"
  local sim_port tern_port
  sim_port=$(free_port)
  tern_port=$(free_port)
  local base="http://127.0.0.1:$tern_port" sim="http://127.0.0.1:$sim_port"
  echo
  echo "=== $name ==="
  local uuid_new org_lit
  case $name in
    sqlite)
      local dbfile=${url#sqlite://}
      sql() { sqlite3 -batch -noheader "$dbfile" "$1"; }
      uuid_new="randomblob(16)"
      ;;
    postgres)
      sql() { psql -h 127.0.0.1 -U postgres -d "$pg_db" -Atq -c "$1"; }
      uuid_new="gen_random_uuid()"
      ;;
  esac

  # The network: statuses at once, no window, no pacing of its own.
  local callback=(--callback-url "$base/webhooks/whatsapp")
  [[ $statuses == 1 ]] || callback=()
  "$tern" simulator --listen "127.0.0.1:$sim_port" "${callback[@]}" \
    --app-secret "$APP_SECRET" --verify-token "$VERIFY_TOKEN" --seed 1 \
    --number "$PNID:$DISPLAY:$WABA:$TOKEN:1000000" --default-mps 1000000 \
    --sent-delay-ms 0 --delivered-delay-ms 0 --read-delay-ms 0 --no-window \
    --pair-burst 1000000000 --pair-period-ms 1 --batch-window-ms "$batch_ms" --batch-max 1000 >"$dir/simulator.log" 2>&1 &
  local sim_pid=$!
  pids+=("$sim_pid")
  wait_http "$sim/_sim/health" simulator "$dir/simulator.log"
  local components='[{"type":"BODY","text":"Hello {{1}}, spring sale!","example":{"body_text":[["Ada"]]}}]'
  curl -sf -X POST "$sim/_sim/templates" -H 'Content-Type: application/json' \
    -d "{\"waba_id\":\"$WABA\",\"name\":\"bench_promo\",\"language\":\"en_US\",\"category\":\"marketing\",\"components\":$components}" >/dev/null

  unset TERN_CONFIG TERN_REDIS_URL
  export TERN_DATABASE_URL="$url" TERN_LISTEN="127.0.0.1:$tern_port" TERN_PUBLIC_URL="$base" \
    TERN_GRAPH_URL="$sim" TERN_APP_SECRET="$APP_SECRET" TERN_VERIFY_TOKEN="$VERIFY_TOKEN" \
    TERN_SECRET_KEY="bench-secret-key-0123456789abcdef0123456789" \
    TERN_MEDIA_STORE="file://$dir/media" TERN_LOG=${BENCH_LOG:-warn} TERN_RATE_LIMITS=off

  local org member key
  org=$("$tern" admin org create --name bench --plan enterprise | json id)
  "$tern" admin number add --org "$org" --phone-number-id "$PNID" --display-phone-number "$DISPLAY" \
    --waba-id "$WABA" --access-token "$TOKEN" --throughput-mps "$tern_mps" >/dev/null
  member=$("$tern" admin member add --org "$org" --email "owner@bench.test" --role owner | json id)
  key=$("$tern" admin key create --org "$org" --member "$member" --name bench --preset full_access | json key)

  # The audience and the approved template, written directly (what an import would leave).
  local now t0 t1
  now=$(now_ms)
  t0=$(now_ms)
  case $name in
    sqlite)
      org_lit="X'${org//-/}'"
      sql "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < $contacts)
           INSERT INTO contacts (id, org_id, wa_id, name, custom_fields, consent_status, created_at, updated_at)
           SELECT $uuid_new, $org_lit, CAST(447000000000 + n AS TEXT), 'C' || n, '{}', 'unknown', $now, $now FROM g;
           INSERT INTO contact_tags (org_id, contact_id, tag, created_at)
           SELECT org_id, id, 'bench', created_at FROM contacts WHERE org_id = $org_lit;
           INSERT INTO templates (id, org_id, waba_id, name, language, category, status, components, network_id, created_at, updated_at)
           VALUES ($uuid_new, $org_lit, '$WABA', 'bench_promo', 'en_US', 'marketing', 'approved', '$components', '1', $now, $now);"
      ;;
    postgres)
      org_lit="'$org'"
      sql "INSERT INTO contacts (id, org_id, wa_id, name, custom_fields, consent_status, created_at, updated_at)
           SELECT $uuid_new, $org_lit, (447000000000 + g)::text, 'C' || g, '{}', 'unknown', $now, $now FROM generate_series(1, $contacts) g;
           INSERT INTO contact_tags (org_id, contact_id, tag, created_at)
           SELECT org_id, id, 'bench', created_at FROM contacts WHERE org_id = $org_lit;
           INSERT INTO templates (id, org_id, waba_id, name, language, category, status, components, network_id, created_at, updated_at)
           VALUES ($uuid_new, $org_lit, '$WABA', 'bench_promo', 'en_US', 'marketing', 'approved', '$components', '1', $now, $now);
           ANALYZE;"
      ;;
  esac
  t1=$(now_ms)
  echo "-- $contacts contacts inserted in $((t1 - t0)) ms"

  # shellcheck disable=SC2086 # BENCH_TERN_WRAP is words (a command and its options)
  ${BENCH_TERN_WRAP:-} "$tern" serve >"$dir/tern.log" 2>&1 &
  local tern_pid=$!
  pids+=("$tern_pid")
  wait_http "$base/readyz" "tern serve" "$dir/tern.log"
  echo "-- tern serve on $base (pid $tern_pid)"
  local auth=(-H "Authorization: Bearer $key" -H 'Content-Type: application/json')

  if [[ $post == 1 ]]; then
    echo "-- 200 API customers write in (their windows open)"
    python3 -c '
import json, sys, urllib.request
sim, pnid, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
for i in range(200):
    body = {"phone_number_id": pnid, "from": f"{prefix}{i:04d}", "type": "text", "text": {"body": "hi"}}
    req = urllib.request.Request(f"{sim}/_sim/inbound", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
' "$sim" "$PNID" "$CUSTOMER_PREFIX"
    sleep 2
  fi

  local cid
  cid=$(curl -sf "${auth[@]}" -X POST "$base$API/campaigns" -d '{"name":"bench","template":{"name":"bench_promo","language":"en_US","variables":[{"field":"name","fallback":"there"}]},"audience":{"tags":["bench"]}}' | json id)
  # --- resolve ------------------------------------------------------------------------------
  local r0 r1 resolve_ms count
  r0=$(now_ms)
  curl -sf "${auth[@]}" -X POST "$base$API/campaigns/$cid/resolve" >"$dir/resolve.json"
  r1=$(now_ms)
  resolve_ms=$((r1 - r0))
  count=$(json recipient_count <"$dir/resolve.json")
  [[ $count == "$contacts" ]] || { echo "resolve wrote $count recipients, expected $contacts" >&2; exit 1; }
  echo "-- resolve: $count recipients in $resolve_ms ms"

  # --- fan-out ------------------------------------------------------------------------------
  curl -sf "${auth[@]}" -X POST "$base$API/campaigns/$cid/launch" >/dev/null
  local wrk_pid=""
  if [[ $post == 1 ]]; then
    wrk -t2 -c32 -d"$((secs + 3))s" --latency -s "$root/bench/send.lua" "$base$API/messages" \
      -- "$key" "cmp$$" 200 "+$CUSTOMER_PREFIX" >"$dir/wrk.txt" 2>&1 &
    wrk_pid=$!
  fi
  python3 - "$base$API/campaigns/$cid/progress" "$key" "$secs" "$tern_mps" "$base/metrics" >"$dir/fanout.txt" <<'EOF'
import json, re, sys, time, urllib.request
url, key, secs, mps, metrics = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def done():
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    p = json.load(urllib.request.urlopen(req, timeout=10))
    return p["sent"] + p["delivered"] + p["read"] + p["failed"], p
def number_done():
    # Every message the dispatcher took off the queue (campaign and API sends alike).
    text = urllib.request.urlopen(metrics, timeout=10).read().decode()
    return sum(float(v) for v in re.findall(
        r'^tern_dispatch_outcomes_total\{outcome="(?:sent|failed)"\} (\S+)$', text, re.M))
start = time.monotonic()
samples = []
while time.monotonic() - start < secs:
    n, p = done()
    samples.append((time.monotonic() - start, n, number_done()))
    time.sleep(1)
t_a, n_a, d_a = next((s for s in samples if s[0] >= 3), samples[0])
t_b, n_b, d_b = samples[-1]
rate = (n_b - n_a) / (t_b - t_a) if t_b > t_a else 0
print(f"NUMBER rate={(d_b - d_a) / (t_b - t_a) if t_b > t_a else 0:.0f}")
worst = min(((samples[i + 1][1] - samples[i][1]) / (samples[i + 1][0] - samples[i][0])
             for i in range(len(samples) - 1) if samples[i][0] >= 3), default=0)
print("per second:", " ".join(str(round((samples[i + 1][1] - samples[i][1]) / (samples[i + 1][0] - samples[i][0]))) for i in range(len(samples) - 1)))
print(f"RESULT rate={rate:.0f} of_tier={100 * rate / mps:.1f} worst_second={worst:.0f} sent={n_b} queued={p['queued']} failed={p['failed']}")
EOF
  [[ -n $wrk_pid ]] && wait "$wrk_pid"
  curl -sf "${auth[@]}" -X POST "$base$API/campaigns/$cid/pause" >/dev/null || true
  local res rate of_tier worst lat rss api=""
  res=$(grep RESULT "$dir/fanout.txt")
  rate=$(sed -n 's/.* rate=\([^ ]*\).*/\1/p' <<<"$res")
  of_tier=$(sed -n 's/.* of_tier=\([^ ]*\).*/\1/p' <<<"$res")
  worst=$(sed -n 's/.* worst_second=\([^ ]*\).*/\1/p' <<<"$res")
  case $name in
    sqlite) lat=$(sql "SELECT sent_at - created_at FROM messages WHERE campaign_id IS NOT NULL AND sent_at IS NOT NULL" | python3 -c '
import math, sys
v = sorted(int(x) for x in sys.stdin.read().split())
r = lambda p: v[max(0, math.ceil(p / 100 * len(v)) - 1)] if v else "-"
print(f"{r(50)}/{r(99)}")') ;;
    postgres) lat=$(sql "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY sent_at - created_at) || '/' || percentile_disc(0.99) WITHIN GROUP (ORDER BY sent_at - created_at) FROM messages WHERE campaign_id IS NOT NULL AND sent_at IS NOT NULL") ;;
  esac
  local unprocessed=1 i
  for i in $(seq 1 600); do
    unprocessed=$(sql "SELECT count(*) FROM network_inbox WHERE processed_at IS NULL")
    [[ $unprocessed == 0 ]] && break
    sleep 0.1
  done
  local id_hex
  case $name in
    sqlite) id_hex="hex(t.id)" ;;
    postgres) id_hex="replace(t.id::text, '-', '')" ;;
  esac
  # When the simulator emitted each status (ms; its webhooks' own timestamps are whole seconds).
  curl -sf "$sim/_sim/messages" >"$dir/sim_messages.json"
  local status_lag
  status_lag=$(sql "SELECT $id_hex || '|' || m.wamid || '|' || t.data FROM message_timeline t JOIN messages m ON m.id = t.message_id WHERE t.kind = 'status'" | python3 -c '
import json, math, sys
from datetime import datetime
def ms(t):
    return int(datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() * 1000)
emitted = {}
for m in json.load(open(sys.argv[1]))["data"]:
    for st, at in zip(m["statuses"], m.get("status_at_ms", [])):
        emitted.setdefault((m["wamid"], st), at)
net, own, exact = [], [], []
by_second = {}
for line in sys.stdin:
    hexid, _, rest = line.rstrip("\n").partition("|")
    wamid, _, data = rest.partition("|")
    d = json.loads(data)
    if not d.get("received_at") or not d.get("network_timestamp"):
        continue
    applied = int(hexid[:12], 16)
    net.append(applied - ms(d["network_timestamp"]))
    own.append(applied - ms(d["received_at"]))
    if (wamid, d.get("status")) in emitted:
        at = emitted[(wamid, d["status"])]
        exact.append(applied - at)
        by_second.setdefault(at // 1000, []).append(applied - at)
def pct(v):
    v = sorted(v)
    r = lambda p: v[max(0, math.ceil(p / 100 * len(v)) - 1)] if v else "-"
    last = v[-1] if v else "-"
    return f"{r(50)}/{r(99)}/{last}"
# Where the tail is: the seconds (of emission, from the first) whose slowest status waited longest.
first = min(by_second) if by_second else 0
worst = sorted(by_second.items(), key=lambda kv: -max(kv[1]))[:5]
tail = ", ".join(f"s{sec - first}: {max(v)} ms ({sum(x > 1000 for x in v)} > 1 s)" for sec, v in sorted(worst))
print(f"{len(net)} reports: emitted → applied p50/p99/max {pct(exact)} ms ({len(exact)} matched; slowest seconds {tail}), network timestamp → applied {pct(net)} ms (whole-second timestamps: up to 1 s high), received → applied {pct(own)} ms")' "$dir/sim_messages.json")
  [[ $unprocessed == 0 ]] || status_lag="$status_lag ($unprocessed notifications still unprocessed after 60 s)"
  rss=$(hwm_mib "$tern_pid")
  if [[ $post == 1 ]]; then
    local api_acc api_sent
    api_acc=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$dir/wrk.txt")
    api_sent=$(sql "SELECT count(*) FROM messages WHERE campaign_id IS NULL AND direction = 'outbound' AND sent_at IS NOT NULL")
    local number_rate
    number_rate=$(sed -n 's/^NUMBER rate=//p' "$dir/fanout.txt")
    api=" · API during fan-out: ${api_acc} POST/s accepted, ${api_sent} sent · the number sent ${number_rate}/s (API and campaign, from second 3)"
    cp "$dir/wrk.txt" "$out/campaigns-$name-wrk.txt"
  fi
  cp "$dir/fanout.txt" "$out/campaigns-$name-fanout.txt"
  cp "$dir/tern.log" "$out/campaigns-$name-tern.log"
  local line="$name: resolve ${resolve_ms} ms ($contacts) · fan-out ${rate}/s (${of_tier} % of ${tern_mps}; worst second ${worst}) · accepted→sent p50/p99 ${lat} ms · peak RSS ${rss} MiB${api} · status lag: ${status_lag}"
  echo "-- $line"
  summary+=("$line")
  kill -TERM "$tern_pid" "$sim_pid" 2>/dev/null || true
  wait "$tern_pid" "$sim_pid" 2>/dev/null || true
}

run_backends tern_bench_campaigns
echo
echo "=== summary (host loop $(python3 -c 'import time;t=time.perf_counter();sum(i*i for i in range(3_000_000));print(f"{time.perf_counter()-t:.2f}")') s) ==="
printf '%s\n' "${summary[@]}"
