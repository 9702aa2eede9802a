#!/usr/bin/env bash
# Send-path benchmark: POST /messages and GET /messages/{id} through a release build of
# `tern serve` pointed at `tern simulator`, on SQLite and on PostgreSQL, plus the
# accepted → sent latency of the dispatcher at a low rate.
#
# Usage: bench/send.sh [seconds per wrk run, default 20]
#   BENCH_BACKENDS="sqlite postgres"  backends to run (default both)
#   BENCH_CONNECTIONS=32 BENCH_THREADS=2  wrk settings
#   BENCH_RECIPIENTS=1000             customers written to, round-robin (1 to 10000); each one
#                                     writes in first. 1 puts every send on one conversation row
#   BENCH_PROBE_N=200                 messages of the latency probe (sent one at a time)
#   BENCH_PROBE_GAP=0.02              pause between two probe sends (s) — about 40/s with curl
#   BENCH_SENT_WAIT=15                seconds to wait for the probe messages to reach `sent`
#   BENCH_TERN_MPS=1000               the number's throughput in Tern (the dispatcher's pacing):
#                                     1,000 is the network's highest standard tier, so the
#                                     dispatcher sends while the API accepts; 1 nearly idles
#                                     the dispatcher, to time the accept path alone
#   BENCH_PG_SAMPLE=0                 1: sample pg_stat_activity every 0.1 s during the POST run
#                                     and print what PostgreSQL backends were doing (diagnostic;
#                                     the sampling itself costs a little CPU)
#   BENCH_WEBHOOK_SUBS=0              N > 0: event webhooks flow while wrk runs. The receiver
#                                     (crates/server/examples/webhook_receiver.rs, built with
#                                     tern) listens on loopback HTTPS before tern starts (tern
#                                     trusts its CA: TERN_EXTRA_CA_FILE, TERN_ALLOW_NETWORKS=
#                                     127.0.0.1/32); right before the POST run N subscriptions
#                                     listing message.status are created (a second key,
#                                     full_access), so every sent/delivered/read status of the
#                                     POSTed messages is delivered N times while wrk runs.
#                                     Reported: deliveries the receiver got during the POST run,
#                                     their latency, the deliveries still pending afterwards,
#                                     and the receiver's CPU. 0 (default): no receiver, as before.
#   BENCH_PLAN=enterprise             the organisation's plan: enterprise has no allowances; growth
#                                     (the default plan) counts messages_sent and api_requests
#                                     against its allowances on every request
#   BENCH_LIMITS=local                request quotas: local (counted in tern, raised out of the
#                                     way so none refuses), redis (counted in the Redis at
#                                     TERN_TEST_REDIS_URL, default redis://127.0.0.1:6379), off
#                                     (TERN_RATE_LIMITS=off: not counted, no headers)
#   BENCH_SIGNINS=0                   N > 0: N sign-ins per second to the app (/app/sign-in, each a real
#                                     argon2id check and a new session) run beside wrk during the
#                                     POST run (bench/app.py pace); their count, rate and latency
#                                     are reported. Compare POST rps with and without.
#   BENCH_TERN_LOG=warn               tern's log filter (TERN_LOG), e.g. warn,sqlx::query=debug for
#                                     each statement's time (costs CPU; the log is in the run's
#                                     temporary directory, deleted at the end)
#   BENCH_SKIP_BUILD=0                1: use the binaries already in CARGO_TARGET_DIR (runs to be
#                                     compared on one build while the tree changes)
#   BENCH_INSERT_PROBE=0              1: right before the POST run, the same wrk run against the
#                                     one-INSERT probe (crates/server/examples/insert_probe.rs,
#                                     built with tern): one INSERT per request into a fresh
#                                     database of the same backend, with tern's pool settings.
#                                     Reported: its req/s and p50/p99, and POST /messages as a
#                                     share of it. Issue 33's setting: BENCH_INSERT_PROBE=1
#                                     BENCH_RECIPIENTS=200 BENCH_TERN_MPS=1 BENCH_PLAN=growth
#
# Per backend:
#   setup    simulator (no status delays, --no-window, no pacing), `tern admin` provisioning
#            (enterprise org, rate limits raised out of the way, a BENCH_TERN_MPS number, a send_messages key),
#            then one inbound message per customer through the simulator (signed webhook →
#            inbox worker), so BENCH_RECIPIENTS conversations have an open window.
#   latency  BENCH_PROBE_N sends one at a time on an idle queue, then sent_at − created_at
#            read from the database. Runs first so the backlog left by the wrk run does not
#            pollute it. The simulator's callback is detached meanwhile: status webhooks
#            carry whole-second timestamps (raised to created_at) and the earliest report
#            wins, so a `sent` webhook would overwrite the dispatcher's millisecond sent_at
#            with a truncated value (often exactly created_at, i.e. 0 ms).
#            If no message reaches `sent` within BENCH_SENT_WAIT s, says so (no numbers).
#   POST     wrk -t2 -c32 on POST /messages (unique Idempotency-Key per request, bench/send.lua);
#            every non-202 is counted and must be 0 (else the script exits 1); rows in the
#            database are cross-checked.
#            With BENCH_WEBHOOK_SUBS, the deliveries go on after it (during the GET run too).
#   GET      wrk -t2 -c32 on GET /messages/{id} over 1,000 accepted ids (bench/get.lua);
#            every non-200 is counted and must be 0.
#   RSS      VmHWM of the tern process (peak resident set) after each wrk run.
#   CPU      CPU seconds of tern, the simulator, PostgreSQL, wrk and everything else during
#            each wrk run, as a share of all cores' time (wall time × cores). "other" is
#            whatever else ran on the machine meanwhile: a busy neighbour skews the run.
#            "host loop": seconds a fixed Python loop took just before the run (≈0.24 when
#            the VM's host is quiet); a contended host (steal time) slows every process
#            and moved POST rps by a third for the same build, so compare runs with it.
# Loopback only; every run is bounded. Raw outputs go to bench/results/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-20}
backends=${BENCH_BACKENDS:-sqlite postgres}
conns=${BENCH_CONNECTIONS:-32}
threads=${BENCH_THREADS:-2}
probe_n=${BENCH_PROBE_N:-200}
recipients=${BENCH_RECIPIENTS:-1000}
[[ $recipients =~ ^[0-9]+$ && $recipients -ge 1 && $recipients -le 10000 ]] || { echo "BENCH_RECIPIENTS must be 1 to 10000" >&2; exit 2; }
probe_gap=${BENCH_PROBE_GAP:-0.02}
sent_wait=${BENCH_SENT_WAIT:-15}
tern_mps=${BENCH_TERN_MPS:-1000}
pg_sample=${BENCH_PG_SAMPLE:-0}
webhook_subs=${BENCH_WEBHOOK_SUBS:-0}
plan=${BENCH_PLAN:-enterprise}
limits=${BENCH_LIMITS:-local}
signins=${BENCH_SIGNINS:-0}
insert_probe=${BENCH_INSERT_PROBE:-0}
[[ $signins =~ ^[0-9]+$ && $signins -le 200 ]] || { echo "BENCH_SIGNINS must be 0 to 200" >&2; exit 2; }
[[ $limits =~ ^(local|redis|off)$ ]] || { echo "BENCH_LIMITS must be local, redis or off" >&2; exit 2; }
[[ $webhook_subs =~ ^[0-9]+$ && $webhook_subs -le 200 ]] || { echo "BENCH_WEBHOOK_SUBS must be 0 to 200" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target-bench}
tern="$CARGO_TARGET_DIR/release/tern"
receiver="$CARGO_TARGET_DIR/release/examples/webhook_receiver"
probe_bin="$CARGO_TARGET_DIR/release/examples/insert_probe"
out="$root/bench/results"
tag="" # raw outputs: send-BACKEND[-whN]-post.txt …
[[ $webhook_subs -gt 0 ]] && tag="-wh$webhook_subs"
[[ $plan != enterprise ]] && tag="$tag-$plan"
[[ $limits != local ]] && tag="$tag-limits-$limits"
[[ $signins -gt 0 ]] && tag="$tag-signins$signins"
[[ $insert_probe == 1 ]] && tag="$tag-probe"

PNID=109000000000001
WABA=209000000000001
DISPLAY=+14155550100
TOKEN=bench-access-token
CUSTOMER_PREFIX=1415556 # customers: 1415556 + 4 digits (14155560000, 14155560001, …)
APP_SECRET="bench-app-secret-$$"
VERIFY_TOKEN="bench-verify-$$"
API=/api/public/v1

# --- tools -----------------------------------------------------------------------------------
need_apt=()
command -v wrk >/dev/null || need_apt+=(wrk)
command -v sqlite3 >/dev/null || need_apt+=(sqlite3)
if ((${#need_apt[@]})); then
  echo "installing ${need_apt[*]} …"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
for t in curl python3 psql; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time (package time) is required" >&2; exit 1; }

# --- cleanup ---------------------------------------------------------------------------------
tmp=$(mktemp -d /tmp/tern-bench-send.XXXXXX)
pids=()
pg_db=""
. "$root/bench/lib.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- helpers ---------------------------------------------------------------------------------
# cpu_split BEFORE AFTER TERN_PID SIM_PID PG_DB WRK_SECONDS [RECEIVER_PID] → one line: shares of
# 2 cores' time. PostgreSQL = its shared processes + backends of the bench database; backends
# of other databases and every other process count as "other" (the top three are named).
cpu_split() {
  python3 - "$@" <<'EOF'
import json, os, sys
before, after = (json.load(open(f)) for f in sys.argv[1:3])
tern_pid, sim_pid, pg_db, wrk = sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6])
rx_pid = sys.argv[7] if len(sys.argv) > 7 else ""
hz = os.sysconf("SC_CLK_TCK")
busy = (after["machine"][0] - before["machine"][0]) / hz
total = (after["machine"][1] - before["machine"][1]) / hz  # wall time × cores
use = {"tern": 0.0, "postgres": 0.0, "simulator": 0.0, "receiver": 0.0}
others = {}
for pid, (comm, cmd, t) in after["procs"].items():
    d = (t - before["procs"].get(pid, [0, 0, 0])[2]) / hz
    if pid == tern_pid:
        use["tern"] += d
    elif pid == sim_pid:
        use["simulator"] += d
    elif rx_pid and pid == rx_pid:
        use["receiver"] += d
    elif comm == "postgres" and pg_db and (pg_db in cmd or ("(" not in cmd and "[local]" not in cmd)):
        use["postgres"] += d
    elif d > 0:
        name = {"postgres": "postgres (other dbs)", "tern": "another tern"}.get(comm, comm)
        others[name] = others.get(name, 0.0) + d
other = max(0.0, busy - sum(use.values()) - wrk)
pct = lambda x: f"{100 * x / total:.0f}%" if total else "?"
top = sorted(others.items(), key=lambda kv: -kv[1])[:3]
named = ", ".join(f"{k} {pct(v)}" for k, v in top if 100 * v / total >= 1)
print(f"tern {pct(use['tern'])} · wrk {pct(wrk)} · postgres {pct(use['postgres'])} · "
      f"simulator {pct(use['simulator'])} · "
      f"{'receiver ' + pct(use['receiver']) + ' · ' if rx_pid else ''}other {pct(other)}{' (' + named + ')' if named else ''} · "
      f"idle {pct(total - busy)} (of {os.cpu_count()} cores)")
EOF
}
percentiles() { # reads integers (ms) on stdin → "p50 p99 n" (nearest rank)
  python3 -c '
import math, sys
v = sorted(int(x) for x in sys.stdin.read().split())
if not v:
    print("- - 0"); sys.exit()
rank = lambda p: v[max(0, math.ceil(p / 100 * len(v)) - 1)]
print(rank(50), rank(99), len(v))'
}
# host_speed → seconds a fixed single-threaded Python loop takes (≈0.24 on this machine type).
host_speed() { python3 -c 'import time;t=time.perf_counter();sum(i*i for i in range(3_000_000));print(f"{time.perf_counter()-t:.2f}")'; }
field() { sed -n "s/.*[ ]$1=\([^ ]*\).*/\1/p" <<<" $2"; } # field NAME "RESULT …"

# --- build -----------------------------------------------------------------------------------
if [[ ${BENCH_SKIP_BUILD:-0} == 1 ]]; then
  echo "not building: BENCH_SKIP_BUILD=1, $tern of $(date -ur "$tern" +%FT%TZ)"
  [[ $webhook_subs -eq 0 || -x $receiver ]] || { echo "$receiver is missing" >&2; exit 1; }
  [[ $insert_probe != 1 || -x $probe_bin ]] || { echo "$probe_bin is missing" >&2; exit 1; }
else
  echo "building tern (release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR) …"
  examples=()
  [[ $webhook_subs -gt 0 ]] && examples+=(--example webhook_receiver)
  [[ $insert_probe == 1 ]] && examples+=(--example insert_probe)
  cargo build --release -p tern --manifest-path "$root/Cargo.toml" -q --bins "${examples[@]}"
fi
mkdir -p "$out"
"$root/scripts/services.sh" >/dev/null

summary=()

# run_backend NAME DATABASE_URL
run_backend() {
  local name=$1 url=$2
  local dir="$tmp/$name"
  mkdir -p "$dir"
  local sim_port tern_port
  sim_port=$(free_port)
  tern_port=$(free_port)
  local base="http://127.0.0.1:$tern_port"
  local sim="http://127.0.0.1:$sim_port"
  local callback="$base/webhooks/whatsapp"
  echo
  echo "=== $name ==="

  local id_expr
  case $name in
    sqlite)
      local dbfile=${url#sqlite://}
      sql() { sqlite3 -batch -noheader "$dbfile" "$1"; }
      id_expr="lower(substr(hex(id),1,8)||'-'||substr(hex(id),9,4)||'-'||substr(hex(id),13,4)||'-'||substr(hex(id),17,4)||'-'||substr(hex(id),21,12))"
      ;;
    postgres)
      sql() { psql -h 127.0.0.1 -U postgres -d "$pg_db" -Atq -c "$1"; }
      id_expr="id::text"
      ;;
  esac

  # The network: instant statuses, no 24 h window, no throughput or pair pacing.
  "$tern" simulator --listen "127.0.0.1:$sim_port" --callback-url "$callback" \
    --app-secret "$APP_SECRET" --verify-token "$VERIFY_TOKEN" --seed 1 \
    --number "$PNID:$DISPLAY:$WABA:$TOKEN:1000000" --default-mps 1000000 \
    --sent-delay-ms 0 --delivered-delay-ms 0 --read-delay-ms 0 --no-window \
    --pair-burst 1000000000 --pair-period-ms 1 >"$dir/simulator.log" 2>&1 &
  local sim_pid=$!
  pids+=("$sim_pid")
  wait_http "$sim/_sim/health" simulator "$dir/simulator.log"

  # The event-webhook receiver first: tern reads its CA at start.
  local rx_pid="" rx_port rx_ctl wh_count="" wh_line=""
  unset TERN_ALLOW_NETWORKS TERN_EXTRA_CA_FILE
  if [[ $webhook_subs -gt 0 ]]; then
    rx_port=$(free_port)
    rx_ctl=$(free_port)
    "$receiver" --https "127.0.0.1:$rx_port" --http "127.0.0.1:$rx_ctl" --ca-out "$dir/ca.pem" \
      >"$dir/receiver.log" 2>&1 &
    rx_pid=$!
    pids+=("$rx_pid")
    wait_http "http://127.0.0.1:$rx_ctl/count" "webhook receiver" "$dir/receiver.log"
    export TERN_ALLOW_NETWORKS=127.0.0.1/32 TERN_EXTRA_CA_FILE="$dir/ca.pem"
  fi

  unset TERN_REDIS_URL TERN_CONFIG TERN_RATE_LIMITS
  case $limits in
    redis) export TERN_REDIS_URL=${TERN_TEST_REDIS_URL:-redis://127.0.0.1:6379} ;;
    off) export TERN_RATE_LIMITS=off ;;
  esac
  export TERN_DATABASE_URL="$url" TERN_LISTEN="127.0.0.1:$tern_port" TERN_PUBLIC_URL="$base" \
    TERN_GRAPH_URL="$sim" TERN_APP_SECRET="$APP_SECRET" TERN_VERIFY_TOKEN="$VERIFY_TOKEN" \
    TERN_SECRET_KEY="bench-secret-key-0123456789abcdef0123456789" \
    TERN_MEDIA_STORE="file://$dir/media" TERN_LOG=${BENCH_TERN_LOG:-warn}

  local org member key
  org=$("$tern" admin org create --name bench --plan "$plan" | json id)
  "$tern" admin org update --org "$org" --rate-limit key-minute=1000000000 \
    --rate-limit tenant-minute=1000000000 --rate-limit key-day=1000000000 \
    --rate-limit tenant-day=1000000000 >/dev/null
  "$tern" admin number add --org "$org" --phone-number-id "$PNID" --display-phone-number "$DISPLAY" \
    --waba-id "$WABA" --access-token "$TOKEN" --throughput-mps "$tern_mps" >/dev/null
  local member_json member invite_url
  member_json=$("$tern" admin member add --org "$org" --email "owner@bench.test" --role owner)
  member=$(json id <<<"$member_json")
  invite_url=$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("invite_url") or "")' <<<"$member_json")
  key=$("$tern" admin key create --org "$org" --member "$member" --name bench --preset send_messages | json key)

  "$tern" serve >"$dir/tern.log" 2>&1 &
  local tern_pid=$!
  pids+=("$tern_pid")
  wait_http "$base/readyz" "tern serve" "$dir/tern.log"
  local signin_pw="bench-sign-in-passphrase-$$"
  if [[ $signins -gt 0 ]]; then
    python3 "$root/bench/app.py" accept "$base" "$invite_url" "$signin_pw" >/dev/null
  fi

  # Every customer writes first (signed network webhook → inbox worker): the windows open.
  echo "-- $recipients customers write in through the simulator"
  python3 -c '
import json, sys, urllib.request
sim, pnid, prefix, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for i in range(n):
    body = {"phone_number_id": pnid, "from": f"{prefix}{i:04d}", "profile_name": f"Bench {i}",
            "type": "text", "text": {"body": "hi"}}
    req = urllib.request.Request(f"{sim}/_sim/inbound", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
' "$sim" "$PNID" "$CUSTOMER_PREFIX" "$recipients"
  local convs=0 i
  for i in $(seq 1 300); do
    convs=$(sql "SELECT count(*) FROM conversations WHERE last_inbound_at IS NOT NULL")
    [[ $convs -ge $recipients ]] && break
    sleep 0.1
  done
  [[ $convs -ge $recipients ]] || { echo "only $convs of $recipients conversations opened in 30 s" >&2; exit 1; }
  local status=""
  for i in $(seq 1 100); do
    status=$(curl -s -o "$dir/warmup.json" -w '%{http_code}' -X POST "$base$API/messages" \
      -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
      -H "Idempotency-Key: warmup-$$-$i" -d "{\"to\":\"+${CUSTOMER_PREFIX}0000\",\"type\":\"text\",\"text\":{\"body\":\"warm-up\"}}")
    [[ $status == 202 ]] && break
    sleep 0.1
  done
  if [[ $status != 202 ]]; then
    echo "the customer's window never opened (last POST /messages: $status $(head -c 300 "$dir/warmup.json"))" >&2
    exit 1
  fi

  # --- accepted → sent latency, idle queue -----------------------------------------------------
  echo "-- accepted → sent: $probe_n sends one at a time (gap ${probe_gap}s)"
  curl -sf -X PUT "$sim/_sim/callback" -H 'Content-Type: application/json' -d '{"url":null}' >/dev/null
  local bad=0
  for i in $(seq 1 "$probe_n"); do
    status=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base$API/messages" \
      -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
      -H "Idempotency-Key: probe-$$-$i" -d "{\"to\":\"+$CUSTOMER_PREFIX$(printf %04d $((i % recipients)))\",\"type\":\"text\",\"text\":{\"body\":\"latency-probe $i\"}}")
    [[ $status == 202 ]] || bad=$((bad + 1))
    sleep "$probe_gap"
  done
  local probe_where="direction='outbound' AND text LIKE 'latency-probe %'"
  local sent=0 waited=0 lat_note lat_p50="-" lat_p99="-"
  while :; do
    sent=$(sql "SELECT count(*) FROM messages WHERE $probe_where AND sent_at IS NOT NULL")
    [[ $sent -ge $((probe_n - bad)) ]] && break
    [[ $waited -ge $((sent_wait * 2)) ]] && break
    sleep 0.5
    waited=$((waited + 1))
  done
  local states
  states=$(sql "SELECT status || '=' || count(*) FROM messages WHERE $probe_where GROUP BY status ORDER BY status" | paste -sd' ')
  if [[ $sent -eq 0 ]]; then
    lat_note="NO message reached sent within ${sent_wait}s (statuses: $states) — dispatcher not running?"
    echo "   NOTICE: $lat_note"
  else
    read -r lat_p50 lat_p99 _ < <(sql "SELECT sent_at - created_at FROM messages WHERE $probe_where AND sent_at IS NOT NULL" | percentiles)
    lat_note="$sent/$probe_n sent (statuses: $states)"
    echo "   p50 ${lat_p50} ms, p99 ${lat_p99} ms; $lat_note"
  fi
  [[ $bad -eq 0 ]] || echo "   WARNING: $bad probe sends were not answered 202"
  curl -sf -X PUT "$sim/_sim/callback" -H 'Content-Type: application/json' -d "{\"url\":\"$callback\"}" >/dev/null

  # --- wrk runs --------------------------------------------------------------------------------
  # run_wrk LABEL OUTFILE wrk-args… → sets RES (RESULT line) and CPU (split string)
  local RES CPU
  run_wrk() {
    local label=$1 file=$2
    shift 2
    local sampler=""
    if [[ $pg_sample == 1 && $name == postgres && $label == POST* ]]; then
      while :; do
        psql -h 127.0.0.1 -U postgres -d postgres -Atq -c "SELECT coalesce(wait_event_type || ':' || wait_event, 'on CPU') || ' | ' || left(regexp_replace(query, '\s+', ' ', 'g'), 90) FROM pg_stat_activity WHERE datname = '$pg_db' AND state <> 'idle' AND pid <> pg_backend_pid()" || true
        echo "-- sample"
        sleep 0.1
      done >"$dir/pg_activity.txt" 2>/dev/null &
      sampler=$!
      pids+=("$sampler")
    fi
    # A fresh checkpoint first, so a timed checkpoint (and the full-page writes after it)
    # cannot land inside one run and not another: it moved POST rps by a third between runs.
    [[ $name == postgres ]] && psql -h 127.0.0.1 -U postgres -d postgres -qc CHECKPOINT >/dev/null
    # The planner's statistics, as a running server's autovacuum has them a minute after the
    # setup's inserts: with none, PostgreSQL costs every index of a small table alike and
    # looked a contact up by phone through (org_id, created_at), 200 rows a lookup.
    [[ $name == postgres ]] && psql -h 127.0.0.1 -U postgres -d "$pg_db" -qc ANALYZE >/dev/null
    # The host's speed right now: on a shared VM the same build's results move by a third
    # with the neighbours' load (steal time), and this fixed loop moves with them.
    local speed
    speed=$(host_speed)
    cpu_snapshot >"$dir/cpu0.json"
    # Bytes tern has written to storage (database, WAL): the write volume of the run.
    local io0
    io0=$(awk '/^write_bytes/{print $2}' "/proc/$tern_pid/io")
    /usr/bin/time -f '%U %S' -o "$dir/wrk.time" wrk "$@" >"$file" 2>&1 || {
      echo "wrk failed:" >&2; cat "$file" >&2; exit 1; }
    [[ -z $rx_pid ]] || wh_count=$(curl -sf "http://127.0.0.1:$rx_ctl/count")
    cpu_snapshot >"$dir/cpu1.json"
    CPU=$(cpu_split "$dir/cpu0.json" "$dir/cpu1.json" "$tern_pid" "$sim_pid" "$pg_db" \
      "$(awk 'END{print $1+$2}' "$dir/wrk.time")" $rx_pid)
    if [[ -n $sampler ]]; then
      kill "$sampler" 2>/dev/null || true
      wait "$sampler" 2>/dev/null || true
      local samples
      samples=$(grep -c '^-- sample' "$dir/pg_activity.txt" || true)
      echo "   pg_stat_activity, $samples samples: non-idle backends per sample, by wait event | query"
      grep -v '^-- sample' "$dir/pg_activity.txt" | sort | uniq -c | sort -rn | head -12 |
        awk -v n="$samples" '{c=$1; $1=""; printf "   %6.2f %s\n", c/n, $0}'
    fi
    RES=$(grep '^RESULT' "$file" || true)
    [[ -n $RES ]] || { echo "wrk printed no RESULT line:" >&2; cat "$file" >&2; exit 1; }
    echo "-- $label"
    grep -E 'Requests/sec|Latency  |Non-2xx' "$file" | sed 's/^/   /'
    echo "   $RES"
    grep '^FIRST_UNEXPECTED' "$file" | sed 's/^/   /' || true
    local io1
    io1=$(awk '/^write_bytes/{print $2}' "/proc/$tern_pid/io")
    CPU="$CPU · host loop ${speed} s · tern wrote $(((io1 - io0) / 1048576)) MiB"
    echo "   CPU: $CPU"
  }

  # Event webhooks: N subscriptions to message.status, created now (not during the probe).
  if [[ $webhook_subs -gt 0 ]]; then
    local wh_key
    wh_key=$("$tern" admin key create --org "$org" --member "$member" --name webhooks --preset full_access | json key)
    python3 "$root/bench/webhooks.py" subs "$base" "$wh_key" "https://127.0.0.1:$rx_port" "$webhook_subs" message.status >/dev/null
    curl -sf -X POST "http://127.0.0.1:$rx_ctl/reset" >/dev/null
    echo "-- $webhook_subs webhook subscriptions (message.status) to https://127.0.0.1:$rx_port/s/{1..$webhook_subs}"
  fi

  # The one-INSERT probe on a fresh database of the same backend, just before the POST run.
  local probe_res=""
  if [[ $insert_probe == 1 ]]; then
    local probe_port probe_url probe_pid probe_db=""
    probe_port=$(free_port)
    case $name in
      sqlite) probe_url="sqlite://$dir/probe.db" ;;
      postgres)
        probe_db="${pg_db}_probe"
        psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE $probe_db" >/dev/null
        probe_url="postgres://postgres@127.0.0.1:5432/$probe_db"
        psql -h 127.0.0.1 -U postgres -d postgres -qc CHECKPOINT >/dev/null
        ;;
    esac
    "$probe_bin" --listen "127.0.0.1:$probe_port" --database-url "$probe_url" >"$dir/probe.log" 2>&1 &
    probe_pid=$!
    pids+=("$probe_pid")
    for i in $(seq 1 200); do
      [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$probe_port/") == 404 ]] && break
      sleep 0.05
    done
    wrk -t"$threads" -c"$conns" -d"${secs}s" --latency -s "$root/bench/send.lua" \
      "http://127.0.0.1:$probe_port$API/messages" -- probe "p$$" "$recipients" "+$CUSTOMER_PREFIX" \
      >"$out/send-$name$tag-insert-probe.txt" 2>&1
    probe_res=$(grep '^RESULT' "$out/send-$name$tag-insert-probe.txt" || true)
    echo "-- one-INSERT probe (wrk -t$threads -c$conns -d${secs}s), peak RSS $(hwm_mib "$probe_pid") MiB"
    echo "   $probe_res"
    kill -TERM "$probe_pid" && wait "$probe_pid" || true
    [[ -z $probe_db ]] || psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $probe_db WITH (FORCE)" >/dev/null
  fi

  local run_id="b$$${name:0:1}" signin_pid="" signin_line=""
  if [[ $signins -gt 0 ]]; then
    python3 "$root/bench/app.py" pace "$base" owner@bench.test "$signin_pw" "$signins" "$secs" \
      >"$dir/signins.txt" 2>&1 &
    signin_pid=$!
    pids+=("$signin_pid")
  fi
  run_wrk "POST /messages (wrk -t$threads -c$conns -d${secs}s)" "$out/send-$name$tag-post.txt" \
    -t"$threads" -c"$conns" -d"${secs}s" --latency -s "$root/bench/send.lua" \
    "$base$API/messages" -- "$key" "$run_id" "$recipients" "+$CUSTOMER_PREFIX"
  local post_res=$RES post_cpu=$CPU post_hwm
  if [[ -n $signin_pid ]]; then
    wait "$signin_pid" || true
    signin_line=$(grep '^RESULT' "$dir/signins.txt" || { cat "$dir/signins.txt" >&2; echo "no sign-in result"; })
    echo "   sign-ins beside the POST run: $signin_line"
  fi
  post_hwm=$(hwm_mib "$tern_pid")
  local rows
  rows=$(sql "SELECT count(*) FROM messages WHERE direction='outbound' AND text = 'bench $run_id'")
  echo "   rows in the database for this run: $rows (wrk counted $(field requests "$post_res") completed; up to $conns more were in flight when it stopped)"
  echo "   peak RSS so far ${post_hwm} MiB"
  local after_post
  after_post=$(sql "SELECT status || '=' || count(*) FROM messages WHERE direction='outbound' AND text = 'bench $run_id' GROUP BY status ORDER BY status" | paste -sd' ')
  echo "   statuses of the POSTed messages right after the run: $after_post"
  if [[ $webhook_subs -gt 0 ]]; then
    curl -sf "http://127.0.0.1:$rx_ctl/stats" >"$dir/wh.json"
    cp "$dir/wh.json" "$out/send-$name$tag-webhooks.json"
    local wh_pending wh_events
    # Pending deliveries, and those of events not fanned out yet (one id per comma + 1).
    wh_pending=$(sql "SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending') + (SELECT COALESCE(SUM(LENGTH(fanout) - LENGTH(REPLACE(fanout, ',', '')) + 1), 0) FROM events WHERE fanout IS NOT NULL)")
    wh_events=$(sql "SELECT count(*) FROM events WHERE type = 'message.status'")
    wh_line=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
count, dups, p50, p99 = s["count"], s["duplicates"], s["latency_ms"]["p50"], s["latency_ms"]["p99"]
n, secs = int(sys.argv[2]), float(sys.argv[3])
print(f"{n} deliveries during the POST run ({n / secs:.0f}/s; {count} by the time of this line, "
      f"{dups} duplicates, latency p50 {p50} ms p99 {p99} ms); "
      f"{sys.argv[4]} message.status events so far, {sys.argv[5]} deliveries pending")
' "$dir/wh.json" "$wh_count" "$secs" "$wh_events" "$wh_pending")
    echo "   webhooks ($webhook_subs subscriptions): $wh_line"
  fi

  sql "SELECT $id_expr FROM messages WHERE direction='outbound' AND text = 'bench $run_id' LIMIT 1000" >"$dir/ids.txt"
  run_wrk "GET /messages/{id} over $(wc -l <"$dir/ids.txt") ids (wrk -t$threads -c$conns -d${secs}s)" \
    "$out/send-$name$tag-get.txt" -t"$threads" -c"$conns" -d"${secs}s" --latency -s "$root/bench/get.lua" \
    "$base$API/messages/" -- "$key" "$dir/ids.txt"
  local get_res=$RES get_cpu=$CPU hwm
  hwm=$(hwm_mib "$tern_pid")

  local backlog
  backlog=$(sql "SELECT status || '=' || count(*) FROM messages WHERE direction='outbound' AND text = 'bench $run_id' GROUP BY status ORDER BY status" | paste -sd' ')
  echo "-- statuses of the POSTed messages after the GET run: $backlog"
  echo "-- peak RSS of tern (VmHWM): $hwm MiB"

  kill -TERM "$tern_pid" && wait "$tern_pid" || true
  kill -TERM "$sim_pid" && wait "$sim_pid" || true
  [[ -z $rx_pid ]] || { kill -TERM "$rx_pid" && wait "$rx_pid" || true; }
  pids=()
  unset -f sql

  summary+=("$name|${wh_line:-}|$(field rps "$post_res")|$(field p50_ms "$post_res")|$(field p99_ms "$post_res")|$(field non_expected "$post_res")|$(field rps "$get_res")|$(field p50_ms "$get_res")|$(field p99_ms "$get_res")|$(field non_expected "$get_res")|$hwm|$lat_p50|$lat_p99|$lat_note|$post_cpu|$get_cpu|$after_post → $backlog|$signin_line|$probe_res")
}

run_backends tern_bench

echo
echo "=== summary: $(nproc) cores, wrk -t$threads -c$conns -d${secs}s, $recipients recipients, $tern_mps mps$([[ $webhook_subs -gt 0 ]] && echo ", $webhook_subs webhook subscriptions (message.status)"), $(date -u +%FT%TZ) ==="
printf '%-9s | %-26s | %-26s | %-8s | %s\n' backend "POST /messages rps p50/p99" "GET /messages/{id} rps p50/p99" "peak RSS" "accepted→sent p50/p99"
for row in "${summary[@]}"; do
  IFS='|' read -r n whline prps pp50 pp99 pbad grps gp50 gp99 gbad hwm lp50 lp99 lnote pcpu gcpu backlog sline probe <<<"$row"
  if [[ $lp50 == "-" ]]; then lat="n/a"; else lat="${lp50} / ${lp99} ms"; fi
  printf '%-9s | %7s/s %6s/%-6s ms | %7s/s %6s/%-6s ms | %5s MiB | %s\n' \
    "$n" "$prps" "$pp50" "$pp99" "$grps" "$gp50" "$gp99" "$hwm" "$lat"
  echo "          non-202 POST: $pbad · non-200 GET: $gbad · latency probe: $lnote"
  echo "          CPU during POST: $pcpu"
  echo "          CPU during GET:  $gcpu"
  echo "          POSTed messages by status (after POST → after GET): $backlog"
  [[ -z $whline ]] || echo "          webhooks, $webhook_subs subscriptions: $whline"
  [[ -z $sline ]] || echo "          sign-ins during POST ($signins/s asked): $sline"
  if [[ -n $probe ]]; then
    probe_rps=$(field rps "$probe")
    echo "          one-INSERT probe: ${probe_rps}/s p50/p99 $(field p50_ms "$probe")/$(field p99_ms "$probe") ms (non-202: $(field non_expected "$probe")) · POST /messages = $(awk -v a="$prps" -v b="$probe_rps" 'BEGIN{printf "%.2f", a/b}') of it"
  fi
done
failed=0
for row in "${summary[@]}"; do
  IFS='|' read -r n _ _ _ _ pbad _ _ _ gbad _ <<<"$row"
  if [[ $pbad != 0 || $gbad != 0 ]]; then
    echo "FAIL: $n answered $pbad POST requests with a status other than 202 and $gbad GET requests with one other than 200" >&2
    failed=1
  fi
done
exit "$failed"
