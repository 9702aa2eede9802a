#!/usr/bin/env bash
# Comparison benchmark: svix-server (open source, github.com/svix/svix-webhooks, server/)
# delivering webhooks to the same loopback HTTPS receiver as bench/webhooks.sh
# (crates/server/examples/webhook_receiver.rs), with 1 and with 50 endpoints, measured and
# printed as bench/webhooks.sh does: deliveries per second, event → delivery latency,
# duplicates, svix-server's peak RSS and CPU. Read with docs/performance.md, "Events against
# svix-server (issue 33)".
#
# Usage: SVIX_SERVER_BIN=/path/to/svix-server bench/svix.sh [deliveries per burst, default 20000]
#   SVIX_SERVER_BIN                   a release build of svix-server (required; not built here)
#   BENCH_SUBS="1 50"                 endpoint counts to run (1 to 200), each on a fresh
#                                     database, Redis queue, svix-server and receiver
#   BENCH_PACE=400 BENCH_PACE_SECS=10 BENCH_CLIENTS=4 BENCH_WAIT=300 BENCH_STALL=30
#   BENCH_RECEIVER_THREADS=2 BENCH_RECEIVER_H2=0 BENCH_SKIP_BUILD=0
#                                     as in bench/webhooks.sh (messages instead of consent changes)
#   BENCH_SVIX_DB_POOL=20             svix's PostgreSQL pool (its default, 100, is the server's
#                                     whole max_connections here)
#   BENCH_SVIX_REDIS_DB=11            the Redis database (index) svix's queue lives in; it must
#                                     be empty at start and is flushed after each run
#
# Building svix-server (nothing of svix is in this repository):
#   git clone https://github.com/svix/svix-webhooks && cd svix-webhooks/server
#   cargo build --release -p svix-server     # → target/release/svix-server (needs libssl-dev)
# server/Cargo.toml patches hyper from github.com/svix/hyper (HeaderCaseMap made public) and
# takes omniqueue and rust-executable-metadata from svix's GitHub; where only crates.io is
# reachable, vendor those three (hyper = crates.io's hyper of the pinned version plus svix's
# two-hunk patch of src/ext/mod.rs) and point the manifests at them by path.
#
# svix runs as one process (API + worker, as its docker image does) with its defaults except:
# SVIX_QUEUE_TYPE=redis (Redis at 127.0.0.1:6379, database BENCH_SVIX_REDIS_DB),
# SVIX_DB_DSN = a fresh PostgreSQL database on 127.0.0.1:5432, SVIX_CACHE_TYPE=memory,
# SVIX_WHITELIST_SUBNETS=[127.0.0.1/32] (svix refuses private addresses otherwise),
# SVIX_WHITELABEL_HEADERS=true (webhook-id / -timestamp / -signature, the Standard Webhooks
# names Tern sends and the receiver checks, instead of svix-*), RUST_LOG=warn (svix's
# log_level has no level above info; RUST_LOG overrides it, as TERN_LOG=warn does), and
# SSL_CERT_FILE = the receiver's CA (svix's OpenSSL client verifies the receiver's
# certificate, as Tern does with TERN_EXTRA_CA_FILE): both deliver over HTTPS, HTTP/1.1.
#
# Per endpoint count:
#   setup    receiver, svix-server --run-migrations, an org token (`svix-server jwt generate`),
#            an application, the event type contact.consent, N endpoints (/s/1 … /s/N, each
#            listing contact.consent), a warm-up (20 messages, every delivery awaited, then
#            the receiver is reset).
#   paced    BENCH_PACE / N messages per second for BENCH_PACE_SECS s, every delivery awaited.
#   burst    E = deliveries / N messages as fast as BENCH_CLIENTS clients send them, every
#            delivery awaited: deliveries/s = received / (last arrival − earliest created_at).
#   latency  arrival at the receiver − the payload's created_at, stamped by the client just
#            before its POST (svix delivers the payload as given): it includes svix's API call,
#            Tern's starts inside it (see bench/svix.py).
#   checks   every message answered 202; distinct webhook-ids = messages; distinct (id, path)
#            = messages × N; paths = N; every request signed (webhook-signature v1,…) with a
#            created_at; duplicates 0; svix's messageattempt rows: all status 0 (success), one
#            per (message, endpoint). Any failure → exit 1 at the end.
#   RSS/CPU  VmHWM of svix-server; CPU of svix-server, the receiver, PostgreSQL (the bench
#            database's backends and the shared processes), redis-server, the clients and
#            the rest, from the burst's start to its last delivery.
# Loopback only; every wait is bounded. Raw outputs go to bench/results/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
burst_deliveries=${1:-20000}
subs_list=${BENCH_SUBS:-1 50}
pace=${BENCH_PACE:-400}
pace_secs=${BENCH_PACE_SECS:-10}
clients=${BENCH_CLIENTS:-4}
wait_max=${BENCH_WAIT:-300}
stall=${BENCH_STALL:-30}
recv_threads=${BENCH_RECEIVER_THREADS:-2}
recv_h2=${BENCH_RECEIVER_H2:-0}
db_pool=${BENCH_SVIX_DB_POOL:-20}
redis_db=${BENCH_SVIX_REDIS_DB:-11}
svix=${SVIX_SERVER_BIN:-}
[[ -n $svix && -x $svix ]] || { echo "SVIX_SERVER_BIN must name a built svix-server (see the header of $0)" >&2; exit 2; }
[[ $burst_deliveries =~ ^[0-9]+$ && $burst_deliveries -ge 1 ]] || { echo "deliveries per burst must be a positive integer" >&2; exit 2; }
for s in $subs_list; do
  [[ $s =~ ^[0-9]+$ && $s -ge 1 && $s -le 200 ]] || { echo "BENCH_SUBS: $s is not 1 to 200" >&2; exit 2; }
done
[[ $redis_db =~ ^[0-9]+$ ]] || { echo "BENCH_SVIX_REDIS_DB must be a number" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target-bench}
receiver="$CARGO_TARGET_DIR/release/examples/webhook_receiver"
out="$root/bench/results"

for t in curl python3 psql redis-cli; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time (package time) is required" >&2; exit 1; }

tmp=$(mktemp -d /tmp/tern-bench-svix.XXXXXX)
pids=()
pg_db=""
. "$root/bench/lib.sh"
rcli() { redis-cli -h 127.0.0.1 -p 6379 -n "$redis_db" "$@"; }
svix_cleanup() {
  local rc=$?
  rcli FLUSHDB >/dev/null 2>&1 || true
  set +e # so that the next line only hands rc on to cleanup (which exits with it)
  (exit "$rc")
  cleanup
}
trap svix_cleanup EXIT
trap 'exit 130' INT TERM

. "$root/bench/deliveries.sh"
answered="messages answered 202"
# cpu_split BEFORE AFTER SVIX_PID RECEIVER_PID PG_DB CLIENT_SECONDS DELIVERIES → as
# bench/webhooks.sh prints for tern, with redis-server (svix's queue) counted apart.
cpu_split() { server_cpu_split svix redis-server "$@"; }

if [[ ${BENCH_SKIP_BUILD:-0} == 1 ]]; then
  echo "not building: BENCH_SKIP_BUILD=1, $receiver of $(date -ur "$receiver" +%FT%TZ)"
else
  echo "building the receiver (release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR) …"
  cargo build --release -p tern --manifest-path "$root/Cargo.toml" -q --example webhook_receiver
fi
[[ -x $receiver ]] || { echo "$receiver is missing" >&2; exit 1; }
svix_version=$("$svix" --version 2>/dev/null | head -1 || echo "svix-server ?")
echo "svix: $svix ($svix_version)"
mkdir -p "$out"
"$root/scripts/services.sh" >/dev/null
[[ $(rcli DBSIZE) == 0 ]] || { echo "Redis database $redis_db is not empty: choose another with BENCH_SVIX_REDIS_DB" >&2; exit 1; }

summary=()
problems=()

# run_one N
run_one() {
  local n=$1
  local run="svix/$n"
  local dir="$tmp/svix-$n"
  mkdir -p "$dir"
  local port rx_port rx_ctl
  port=$(free_port); rx_port=$(free_port); rx_ctl=$(free_port)
  local base="http://127.0.0.1:$port"
  echo
  echo "=== svix-server, $n endpoint(s) ==="
  sql() { psql -h 127.0.0.1 -U postgres -d "$pg_db" -Atq -c "$1"; }

  local h2_flag=()
  [[ $recv_h2 == 1 ]] && h2_flag=(--h2)
  "$receiver" --https "127.0.0.1:$rx_port" --http "127.0.0.1:$rx_ctl" --ca-out "$dir/ca.pem" \
    --threads "$recv_threads" "${h2_flag[@]}" >"$dir/receiver.log" 2>&1 &
  local rx_pid=$!
  pids+=("$rx_pid")
  wait_http "http://127.0.0.1:$rx_ctl/count" receiver "$dir/receiver.log"

  # No config.toml is read: svix looks for one in its working directory, here $dir.
  export SVIX_LISTEN_ADDRESS="127.0.0.1:$port" \
    SVIX_DB_DSN="postgres://postgres@127.0.0.1:5432/$pg_db?sslmode=disable" SVIX_DB_POOL_MAX_SIZE="$db_pool" \
    SVIX_QUEUE_TYPE=redis SVIX_REDIS_DSN="redis://127.0.0.1:6379/$redis_db" SVIX_CACHE_TYPE=memory \
    SVIX_JWT_SECRET="bench-jwt-secret-$$-0123456789abcdef" SVIX_MAIN_SECRET="bench-main-secret-$$-0123456789ab" \
    SVIX_WHITELIST_SUBNETS="[127.0.0.1/32]" SVIX_WHITELABEL_HEADERS=true RUST_LOG=warn \
    SSL_CERT_FILE="$dir/ca.pem"
  unset DATABASE_URL
  (cd "$dir" && exec "$svix" --run-migrations) >"$dir/svix.log" 2>&1 &
  local svix_pid=$!
  pids+=("$svix_pid")
  local up=0
  for _ in $(seq 1 600); do
    curl -sf -o /dev/null "$base/api/v1/health/" && { up=1; break; }
    kill -0 "$svix_pid" 2>/dev/null || break
    sleep 0.1
  done
  ((up)) || { echo "svix-server did not come up; last log lines:" >&2; tail -n 20 "$dir/svix.log" >&2; exit 1; }
  local token app
  token=$(cd "$dir" && "$svix" jwt generate 2>/dev/null | sed -n 's/^Token (Bearer): //p')
  [[ -n $token ]] || { echo "svix-server jwt generate gave no token" >&2; exit 1; }
  app=$(python3 "$root/bench/svix.py" setup "$base" "$token" "https://127.0.0.1:$rx_port" "$n" contact.consent)
  echo "-- application $app, $n endpoints to https://127.0.0.1:$rx_port/s/{1..$n} (contact.consent)"

  local res
  res=$(python3 "$root/bench/svix.py" burst "$base" "$token" "$app" 20 "$clients")
  python3 "$root/bench/webhooks.py" wait "http://127.0.0.1:$rx_ctl" $(($(field ok "$res") * n)) 60 15 >/dev/null
  curl -sf -X POST "http://127.0.0.1:$rx_ctl/reset" >/dev/null
  # The queue is svix's Redis one (its keys are in database $redis_db), not its in-memory one.
  local keys
  keys=$(rcli --scan | paste -sd' ' | cut -c1-120)
  [[ -n $keys ]] || problem "no svix keys in Redis database $redis_db" "$run"
  echo "-- Redis database $redis_db holds: $keys"

  # --- paced -----------------------------------------------------------------------------------
  local rate
  rate=$(python3 -c "print(max(1.0, $pace / $n))")
  echo "-- paced: $rate messages/s × ${pace_secs}s ($pace deliveries/s aimed at)"
  res=$(python3 "$root/bench/svix.py" pace "$base" "$token" "$app" "$rate" "$pace_secs" "$clients")
  echo "   $res"
  [[ $(field non200 "$res") == 0 ]] || problem "paced: $(field non200 "$res") messages not answered 202" "$run"
  phase_check paced "$dir" "$rx_ctl" "$n" "$(field ok "$res")" "$run"
  cp "$ST" "$out/svix-$n-paced.json"
  local paced_res=$res paced_st
  paced_st=$(cat "$ST")
  curl -sf -X POST "http://127.0.0.1:$rx_ctl/reset" >/dev/null

  # --- burst -----------------------------------------------------------------------------------
  local events=$(((burst_deliveries + n - 1) / n))
  echo "-- burst: $events messages by $clients clients → $((events * n)) deliveries"
  psql -h 127.0.0.1 -U postgres -d postgres -qc CHECKPOINT >/dev/null
  local speed
  speed=$(host_speed)
  cpu_snapshot >"$dir/cpu0.json"
  res=$(/usr/bin/time -f '%U %S' -o "$dir/client.time" \
    python3 "$root/bench/svix.py" burst "$base" "$token" "$app" "$events" "$clients")
  echo "   $res"
  [[ $(field non200 "$res") == 0 ]] || problem "burst: $(field non200 "$res") messages not answered 202" "$run"
  snap_after_wait="$dir/cpu1.json"
  phase_check burst "$dir" "$rx_ctl" "$n" "$(field ok "$res")" "$run"
  snap_after_wait=""
  local burst_st=$ST cpu
  cpu=$(cpu_split "$dir/cpu0.json" "$dir/cpu1.json" "$svix_pid" "$rx_pid" "$pg_db" \
    "$(awk 'END{print $1+$2}' "$dir/client.time")" "$(jget count <"$burst_st")")
  cpu="$cpu · host loop ${speed} s"
  echo "   deliveries/s $(jget per_s <"$burst_st") (received / (last arrival − first event created))"
  echo "   CPU: $cpu"
  cp "$burst_st" "$out/svix-$n-burst.json"

  # svix's own record: one attempt per (message, endpoint), all succeeded (status 0), none
  # retried; messages = warm-up + paced + burst.
  local states msgs pairs
  states=$(sql "SELECT status || '=' || count(*) FROM messageattempt GROUP BY status ORDER BY status" | paste -sd' ')
  msgs=$(sql "SELECT count(*) FROM message")
  pairs=$(sql "SELECT count(DISTINCT (msg_id, endp_id)) FROM messageattempt")
  echo "-- database: $msgs messages; attempts by status: $states; distinct (message, endpoint) $pairs"
  [[ $states == "0=$((msgs * n))" && $pairs == "$((msgs * n))" ]] ||
    problem "attempts not one success per (message, endpoint): $states, $pairs pairs ($msgs messages × $n)" "$run"
  local hwm rx_hwm
  hwm=$(hwm_mib "$svix_pid"); rx_hwm=$(hwm_mib "$rx_pid")
  echo "-- peak RSS (VmHWM): svix-server $hwm MiB, receiver $rx_hwm MiB"
  local warns
  warns=$(grep -ciE 'WARN|ERROR|panicked' "$dir/svix.log" || true)
  if [[ $warns != 0 ]]; then
    echo "   svix-server logged $warns warnings/errors, first ones:"
    grep -m 5 -iE 'WARN|ERROR|panicked' "$dir/svix.log" | cut -c1-300 | sed 's/^/     /'
    cp "$dir/svix.log" "$out/svix-$n-server.log"
  fi

  kill -TERM "$svix_pid" && wait "$svix_pid" || true
  kill -TERM "$rx_pid" && wait "$rx_pid" || true
  pids=()
  unset -f sql

  summary+=("svix|$n|$(field per_s "$paced_res")|$(jget latency_ms.p50 <<<"$paced_st")|$(jget latency_ms.p99 <<<"$paced_st")|$events|$(field per_s "$res")|$(jget count <"$burst_st")|$(jget per_s <"$burst_st")|$(jget latency_ms.p50 <"$burst_st")|$(jget latency_ms.p99 <"$burst_st")|$(jget latency_ms.max <"$burst_st")|$(( $(jget duplicates <<<"$paced_st") + $(jget duplicates <"$burst_st") ))|$hwm|$cpu")
}

for n in $subs_list; do
  pg_db="svix_bench_$$_$n"
  psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE $pg_db" >/dev/null
  run_one "$n"
  psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE $pg_db WITH (FORCE)" >/dev/null
  pg_db=""
  rcli FLUSHDB >/dev/null
done

{
  echo
  echo "=== summary: $(nproc) cores, $svix_version, burst of $burst_deliveries deliveries, paced $pace deliveries/s × ${pace_secs}s, $clients clients, receiver HTTP/$([[ $recv_h2 == 1 ]] && echo "2 offered" || echo "1.1") over HTTPS, $(date -u +%FT%TZ) ==="
  printf '%-9s %7s | %-30s | %-48s | %4s | %s\n' server endpts "paced: msgs/s, p50/p99 ms" "burst: msgs (per s) → deliveries/s, p50/p99/max ms" dups "peak RSS"
  for row in "${summary[@]}"; do
    IFS='|' read -r b n prate pp50 pp99 ev erate cnt dps bp50 bp99 bmax dups hwm cpu <<<"$row"
    printf '%-9s %7s | %8s/s %6s / %-6s      | %6s (%6s/s) → %6s/s %6s / %-6s / %-6s | %4s | %s MiB\n' \
      "$b" "$n" "$prate" "$pp50" "$pp99" "$ev" "$erate" "$dps" "$bp50" "$bp99" "$bmax" "$dups" "$hwm"
    echo "                CPU during the burst: $cpu"
  done
} | tee "$out/svix-summary.txt"
if ((${#problems[@]})); then
  printf 'FAIL: %s\n' "${problems[@]}" >&2
  exit 1
fi
