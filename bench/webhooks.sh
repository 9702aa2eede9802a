#!/usr/bin/env bash
# Event-webhook benchmark: `contact.consent` events from a release build of `tern serve`
# delivered (signed, Standard Webhooks headers) to a loopback HTTPS receiver
# (crates/server/examples/webhook_receiver.rs), with 1 and with 50 subscriptions, on SQLite
# and on PostgreSQL: deliveries per second, event → delivery latency, duplicates, and tern's
# peak RSS and CPU.
#
# Usage: bench/webhooks.sh [deliveries per burst, default 20000]
#   BENCH_BACKENDS="sqlite postgres"  backends to run (default both)
#   BENCH_SUBS="1 50"                 subscription counts to run (1 to 200), each on a fresh
#                                     database, tern and receiver
#   BENCH_PACE=400                    deliveries per second aimed at in the paced run (the
#                                     consent changes per second are BENCH_PACE / subscriptions)
#   BENCH_PACE_SECS=10                length of the paced run (s)
#   BENCH_CLIENTS=4                   concurrent keep-alive clients making consent changes
#   BENCH_CONTACTS=200                contacts the changes go round-robin over (> clients)
#   BENCH_WAIT=300                    most seconds to wait for a phase's deliveries
#   BENCH_STALL=30                    … or seconds without a new delivery
#   BENCH_RECEIVER_THREADS=2          worker threads of the receiver
#   BENCH_RECEIVER_H2=0               1: the receiver offers HTTP/2 too (default HTTP/1.1 only)
#   BENCH_PG_SAMPLE=0                 1: sample pg_stat_activity every 0.1 s during the burst and
#                                     print what PostgreSQL backends were doing (diagnostic; the
#                                     sampling itself costs a little CPU)
#   BENCH_SKIP_BUILD=0                1: use the binaries already in CARGO_TARGET_DIR (runs to be
#                                     compared on one build while the tree changes)
#   BENCH_STREAMS="0"                 event streams (GET /events/stream) open during each run, e.g.
#                                     "0 10": every backend × subscription count once without and
#                                     once with 10 streams (each of its own key, contact.consent,
#                                     read by curl); with streams, every stream must receive every
#                                     event exactly once (checked at the end of the run)
#
# Per backend × subscription count:
#   setup    the receiver (a CA and a leaf certificate made at start; tern trusts the CA
#            through TERN_EXTRA_CA_FILE, TERN_ALLOW_NETWORKS=127.0.0.1/32 lets it deliver to
#            loopback), `tern admin` provisioning (enterprise org, rate limits raised out of
#            the way, an owner, a full_access key), `tern serve`, BENCH_CONTACTS contacts, N
#            subscriptions listing contact.consent, each its own path (/s/1 … /s/N), then a
#            warm-up (20 changes, every delivery awaited; the receiver is reset after it).
#   paced    BENCH_PACE / N consent changes per second for BENCH_PACE_SECS s (open loop,
#            on a schedule), then every delivery awaited: latency = arrival at the receiver −
#            the event's created_at (same clock), p50/p99/max (nearest rank).
#   burst    E = deliveries / N consent changes (at least 1) as fast as BENCH_CLIENTS
#            clients make them, then every delivery awaited: deliveries/s = deliveries
#            received / (last arrival − the earliest event's created_at); latency as above
#            (under saturation it is mostly queueing: the last events wait for the backlog).
#   checks   every change answered 200; distinct webhook-ids = changes answered 200;
#            distinct (webhook-id, path) = changes × N; paths = N; every request signed with
#            a created_at; duplicates (requests − distinct (id, path)) reported, 0 expected;
#            the deliveries table: all succeeded. Any failure → exit 1 at the end.
#   RSS      VmHWM of tern (and of the receiver) at the end.
#   CPU      CPU seconds of tern, the receiver, PostgreSQL, the clients and everything else
#            from the burst's start until its last delivery, as a share of all cores' time;
#            tern's CPU per delivery (µs). "host loop": seconds a fixed Python loop took
#            just before the burst (≈0.24 when the VM's host is quiet; slower = contended).
# Loopback only (127.0.0.1); every wait is bounded. Raw outputs go to bench/results/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
burst_deliveries=${1:-20000}
backends=${BENCH_BACKENDS:-sqlite postgres}
subs_list=${BENCH_SUBS:-1 50}
pace=${BENCH_PACE:-400}
pace_secs=${BENCH_PACE_SECS:-10}
clients=${BENCH_CLIENTS:-4}
contacts_n=${BENCH_CONTACTS:-200}
wait_max=${BENCH_WAIT:-300}
stall=${BENCH_STALL:-30}
recv_threads=${BENCH_RECEIVER_THREADS:-2}
recv_h2=${BENCH_RECEIVER_H2:-0}
pg_sample=${BENCH_PG_SAMPLE:-0}
streams_list=${BENCH_STREAMS:-0}
[[ $burst_deliveries =~ ^[0-9]+$ && $burst_deliveries -ge 1 ]] || { echo "deliveries per burst must be a positive integer" >&2; exit 2; }
for s in $subs_list; do
  [[ $s =~ ^[0-9]+$ && $s -ge 1 && $s -le 200 ]] || { echo "BENCH_SUBS: $s is not 1 to 200" >&2; exit 2; }
done
for st in $streams_list; do
  [[ $st =~ ^[0-9]+$ && $st -le 100 ]] || { echo "BENCH_STREAMS: $st is not 0 to 100" >&2; exit 2; }
done
[[ $contacts_n -gt $clients ]] || { echo "BENCH_CONTACTS must exceed BENCH_CLIENTS" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target-bench}
tern="$CARGO_TARGET_DIR/release/tern"
receiver="$CARGO_TARGET_DIR/release/examples/webhook_receiver"
out="$root/bench/results"
APP_SECRET="bench-webhooks-secret-$$"
PHONE_PREFIX=+4477009 # contacts: +4477009 + 5 digits
API=/api/public/v1

# --- tools -----------------------------------------------------------------------------------
command -v sqlite3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sqlite3 >/dev/null; }
for t in curl python3 psql; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time (package time) is required" >&2; exit 1; }

# --- cleanup ---------------------------------------------------------------------------------
tmp=$(mktemp -d /tmp/tern-bench-webhooks.XXXXXX)
pids=()
pg_db=""
. "$root/bench/lib.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- helpers ---------------------------------------------------------------------------------
. "$root/bench/deliveries.sh"
answered="changes answered 200"
# cpu_split BEFORE AFTER TERN_PID RECEIVER_PID PG_DB CLIENT_SECONDS DELIVERIES (bench/deliveries.sh)
cpu_split() { server_cpu_split tern "" "$@"; }

# --- build -----------------------------------------------------------------------------------
if [[ ${BENCH_SKIP_BUILD:-0} == 1 ]]; then
  echo "not building: BENCH_SKIP_BUILD=1, $tern of $(date -ur "$tern" +%FT%TZ)"
else
  echo "building tern and the receiver (release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR) …"
  cargo build --release -p tern --manifest-path "$root/Cargo.toml" -q --bins --example webhook_receiver
fi
[[ -x $tern && -x $receiver ]] || { echo "$tern or $receiver is missing" >&2; exit 1; }
mkdir -p "$out"
"$root/scripts/services.sh" >/dev/null

summary=()
problems=()

# run_one BACKEND DATABASE_URL SUBS STREAMS
run_one() {
  local name=$1 url=$2 n=$3 st=$4
  local run="$name/$n/$st"
  local dir="$tmp/$name-$n-$st"
  mkdir -p "$dir"
  local tern_port rx_port rx_ctl
  tern_port=$(free_port); rx_port=$(free_port); rx_ctl=$(free_port)
  local base="http://127.0.0.1:$tern_port"
  echo
  echo "=== $name, $n subscription(s), $st event stream(s) ==="

  case $name in
    sqlite)
      local dbfile=${url#sqlite://}
      sql() { sqlite3 -batch -noheader "$dbfile" "$1"; }
      ;;
    postgres)
      sql() { psql -h 127.0.0.1 -U postgres -d "$pg_db" -Atq -c "$1"; }
      ;;
  esac

  local h2_flag=()
  [[ $recv_h2 == 1 ]] && h2_flag=(--h2)
  "$receiver" --https "127.0.0.1:$rx_port" --http "127.0.0.1:$rx_ctl" --ca-out "$dir/ca.pem" \
    --threads "$recv_threads" "${h2_flag[@]}" >"$dir/receiver.log" 2>&1 &
  local rx_pid=$!
  pids+=("$rx_pid")
  wait_http "http://127.0.0.1:$rx_ctl/count" receiver "$dir/receiver.log"

  unset TERN_REDIS_URL TERN_CONFIG
  export TERN_DATABASE_URL="$url" TERN_LISTEN="127.0.0.1:$tern_port" TERN_PUBLIC_URL="$base" \
    TERN_GRAPH_URL="http://127.0.0.1:9" TERN_APP_SECRET="$APP_SECRET" TERN_VERIFY_TOKEN=bench \
    TERN_SECRET_KEY="bench-secret-key-0123456789abcdef0123456789" \
    TERN_MEDIA_STORE="file://$dir/media" TERN_LOG=warn \
    TERN_ALLOW_NETWORKS=127.0.0.1/32 TERN_EXTRA_CA_FILE="$dir/ca.pem"

  local org member key
  org=$("$tern" admin org create --name bench --plan enterprise | json id)
  "$tern" admin org update --org "$org" --rate-limit key-minute=1000000000 \
    --rate-limit tenant-minute=1000000000 --rate-limit key-day=1000000000 \
    --rate-limit tenant-day=1000000000 >/dev/null
  member=$("$tern" admin member add --org "$org" --email "owner@bench.test" --role owner | json id)
  key=$("$tern" admin key create --org "$org" --member "$member" --name bench --preset full_access | json key)

  "$tern" serve >"$dir/tern.log" 2>&1 &
  local tern_pid=$!
  pids+=("$tern_pid")
  wait_http "$base/readyz" "tern serve" "$dir/tern.log"

  python3 "$root/bench/webhooks.py" contacts "$base" "$key" "$contacts_n" "$PHONE_PREFIX" "$dir/ids.txt"
  python3 "$root/bench/webhooks.py" subs "$base" "$key" "https://127.0.0.1:$rx_port" "$n" contact.consent >/dev/null
  echo "-- $contacts_n contacts, $n subscriptions to https://127.0.0.1:$rx_port/s/{1..$n} (contact.consent)"

  # Event streams: one key each (a stream is one per key and types), read by curl to a file.
  local i skey
  for ((i = 1; i <= st; i++)); do
    skey=$("$tern" admin key create --org "$org" --member "$member" --name "stream-$i" --preset full_access | json key)
    curl -sN -H "Authorization: Bearer $skey" "$base$API/events/stream?types=contact.consent" \
      >"$dir/stream-$i.txt" 2>/dev/null &
    pids+=("$!")
  done
  if ((st > 0)); then
    # Every stream registered and held before the first event (a first connection starts
    # from now).
    local held=0
    for _ in $(seq 1 300); do
      held=$(sql "SELECT count(*) FROM event_streams WHERE lease_owner IS NOT NULL")
      [[ $held == "$st" ]] && break
      sleep 0.1
    done
    [[ $held == "$st" ]] || problem "only $held of $st event streams opened" "$run"
    echo "-- $st event streams open (contact.consent), each of its own key"
  fi

  # Warm-up: connections opened, caches filled; nothing of it is counted.
  local res
  res=$(python3 "$root/bench/webhooks.py" burst "$base" "$key" "$dir/ids.txt" 20 "$clients")
  python3 "$root/bench/webhooks.py" wait "http://127.0.0.1:$rx_ctl" $(($(field ok "$res") * n)) 60 15 >/dev/null
  curl -sf -X POST "http://127.0.0.1:$rx_ctl/reset" >/dev/null

  # --- paced -----------------------------------------------------------------------------------
  local rate
  rate=$(python3 -c "print(max(1.0, $pace / $n))")
  echo "-- paced: $rate consent changes/s × ${pace_secs}s ($pace deliveries/s aimed at)"
  res=$(python3 "$root/bench/webhooks.py" pace "$base" "$key" "$dir/ids.txt" "$rate" "$pace_secs" "$clients")
  echo "   $res"
  [[ $(field non200 "$res") == 0 ]] || problem "paced: $(field non200 "$res") changes not answered 200" "$run"
  phase_check paced "$dir" "$rx_ctl" "$n" "$(field ok "$res")" "$run"
  cp "$ST" "$out/webhooks-$name-$n-paced.json"
  local paced_res=$res paced_st
  paced_st=$(cat "$ST")
  curl -sf -X POST "http://127.0.0.1:$rx_ctl/reset" >/dev/null

  # --- burst -----------------------------------------------------------------------------------
  local events=$(((burst_deliveries + n - 1) / n))
  echo "-- burst: $events consent changes by $clients clients → $((events * n)) deliveries"
  [[ $name == postgres ]] && psql -h 127.0.0.1 -U postgres -d postgres -qc CHECKPOINT >/dev/null
  local speed sampler=""
  speed=$(host_speed)
  if [[ $pg_sample == 1 && $name == postgres ]]; then
    for _ in $(seq 1 $((wait_max * 10 + 600))); do
      psql -h 127.0.0.1 -U postgres -d postgres -Atq -c "SELECT coalesce(wait_event_type || ':' || wait_event, 'on CPU') || ' | ' || left(regexp_replace(query, '\s+', ' ', 'g'), 90) FROM pg_stat_activity WHERE datname = '$pg_db' AND state <> 'idle' AND pid <> pg_backend_pid()" || true
      echo "-- sample"
      sleep 0.1
    done >"$dir/pg_activity.txt" 2>/dev/null &
    sampler=$!
    pids+=("$sampler")
  fi
  cpu_snapshot >"$dir/cpu0.json"
  res=$(/usr/bin/time -f '%U %S' -o "$dir/client.time" \
    python3 "$root/bench/webhooks.py" burst "$base" "$key" "$dir/ids.txt" "$events" "$clients")
  echo "   $res"
  [[ $(field non200 "$res") == 0 ]] || problem "burst: $(field non200 "$res") changes not answered 200" "$run"
  snap_after_wait="$dir/cpu1.json"
  phase_check burst "$dir" "$rx_ctl" "$n" "$(field ok "$res")" "$run"
  snap_after_wait=""
  if [[ -n $sampler ]]; then
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    local samples
    samples=$(grep -c '^-- sample' "$dir/pg_activity.txt" || true)
    echo "   pg_stat_activity, $samples samples: non-idle backends per sample, by wait event | query"
    grep -v '^-- sample' "$dir/pg_activity.txt" | sort | uniq -c | sort -rn | head -12 |
      awk -v n="$samples" '{c=$1; $1=""; printf "   %6.2f %s\n", c/n, $0}'
  fi
  local burst_st=$ST
  local cpu
  cpu=$(cpu_split "$dir/cpu0.json" "$dir/cpu1.json" "$tern_pid" "$rx_pid" "$pg_db" \
    "$(awk 'END{print $1+$2}' "$dir/client.time")" "$(jget count <"$burst_st")")
  cpu="$cpu · host loop ${speed} s"
  echo "   deliveries/s $(jget per_s <"$burst_st") (received / (last arrival − first event created))"
  echo "   CPU: $cpu"
  cp "$burst_st" "$out/webhooks-$name-$n-burst.json"

  local states events_db
  # The subscriptions' deliveries (a stream's rows stay pending until a reconnect acknowledges
  # them).
  states=$(sql "SELECT d.status || '=' || count(*) FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE s.kind = 'webhook' GROUP BY d.status ORDER BY d.status" | paste -sd' ')
  events_db=$(sql "SELECT count(*) FROM events WHERE type = 'contact.consent'")
  echo "-- database: $events_db contact.consent events; deliveries by status: $states"
  [[ $states == "succeeded=$((events_db * n))" ]] || problem "deliveries not all succeeded: $states ($events_db events × $n)" "$run"
  # Every stream got every event once (bounded wait: they read as the fan-out gives rows).
  for ((i = 1; i <= st; i++)); do
    local got=0 distinct=0
    for _ in $(seq 1 600); do
      got=$(grep -c '^id: ' "$dir/stream-$i.txt" || true)
      [[ $got -ge $events_db ]] && break
      sleep 0.1
    done
    distinct=$(grep '^id: ' "$dir/stream-$i.txt" | sort -u | wc -l)
    [[ $got == "$events_db" && $distinct == "$events_db" ]] ||
      problem "stream $i received $got events ($distinct distinct), $events_db expected" "$run"
  done
  ((st == 0)) || echo "-- each of the $st streams received the $events_db events once"
  local hwm rx_hwm
  hwm=$(hwm_mib "$tern_pid"); rx_hwm=$(hwm_mib "$rx_pid")
  echo "-- peak RSS (VmHWM): tern $hwm MiB, receiver $rx_hwm MiB"
  local warns
  warns=$(grep -cE '"level":"(WARN|ERROR)"|panicked' "$dir/tern.log" || true)
  if [[ $warns != 0 ]]; then
    echo "   tern logged $warns warnings/errors, first ones:"
    grep -m 5 -E '"level":"(WARN|ERROR)"|panicked' "$dir/tern.log" | cut -c1-300 | sed 's/^/     /'
    cp "$dir/tern.log" "$out/webhooks-$name-$n-tern.log"
  fi

  kill -TERM "$tern_pid" && wait "$tern_pid" || true
  kill -TERM "$rx_pid" && wait "$rx_pid" || true
  pids=()
  unset -f sql

  summary+=("$name|$n+${st}s|$(field per_s "$paced_res")|$(jget latency_ms.p50 <<<"$paced_st")|$(jget latency_ms.p99 <<<"$paced_st")|$events|$(field per_s "$res")|$(jget count <"$burst_st")|$(jget per_s <"$burst_st")|$(jget latency_ms.p50 <"$burst_st")|$(jget latency_ms.p99 <"$burst_st")|$(jget latency_ms.max <"$burst_st")|$(( $(jget duplicates <<<"$paced_st") + $(jget duplicates <"$burst_st") ))|$hwm|$cpu")
}

for b in $backends; do
  for n in $subs_list; do
    for st in $streams_list; do
      case $b in
        sqlite) run_one sqlite "sqlite://$tmp/bench-$n-$st.db" "$n" "$st" ;;
        postgres)
          pg_db="tern_bench_wh_$$_${n}_$st"
          psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE $pg_db" >/dev/null
          run_one postgres "postgres://postgres@127.0.0.1:5432/$pg_db?sslmode=disable" "$n" "$st"
          psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE $pg_db WITH (FORCE)" >/dev/null
          pg_db=""
          ;;
        *) echo "unknown backend $b (sqlite, postgres)" >&2; exit 2 ;;
      esac
    done
  done
done

{
  echo
  echo "=== summary: $(nproc) cores, burst of $burst_deliveries deliveries, paced $pace deliveries/s × ${pace_secs}s, $clients clients, receiver HTTP/$([[ $recv_h2 == 1 ]] && echo "2 offered" || echo "1.1"), tree $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- crates || echo +changes), $(date -u +%FT%TZ) ==="
  printf '%-9s %7s | %-30s | %-48s | %4s | %s\n' backend subs "paced: changes/s, p50/p99 ms" "burst: changes (per s) → deliveries/s, p50/p99/max ms" dups "peak RSS"
  for row in "${summary[@]}"; do
    IFS='|' read -r b n prate pp50 pp99 ev erate cnt dps bp50 bp99 bmax dups hwm cpu <<<"$row"
    printf '%-9s %7s | %8s/s %6s / %-6s      | %6s (%6s/s) → %6s/s %6s / %-6s / %-6s | %4s | %s MiB\n' \
      "$b" "$n" "$prate" "$pp50" "$pp99" "$ev" "$erate" "$dps" "$bp50" "$bp99" "$bmax" "$dups" "$hwm"
    echo "                CPU during the burst: $cpu"
  done
} | tee "$out/webhooks-summary.txt"
if ((${#problems[@]})); then
  printf 'FAIL: %s\n' "${problems[@]}" >&2
  exit 1
fi
