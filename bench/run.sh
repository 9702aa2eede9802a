#!/usr/bin/env bash
# Read-path benchmark: GET /phone-numbers and GET /contacts/{id} through a release build,
# on SQLite and on PostgreSQL. Reports throughput, p50/p99 latency and peak RSS.
# Usage: bench/run.sh [seconds per run, default 10]. Loopback only; bounded by -d.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-10}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
"$root/scripts/services.sh" >/dev/null
cargo build --release -p tern --manifest-path "$root/Cargo.toml" -q
tern="$root/target/release/tern"
out="$root/bench/results"
mkdir -p "$out"
json() { python3 -c "import sys,json; print(json.load(sys.stdin)[\"$1\"])"; }

run_backend() {
  local name=$1 url=$2
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  export TERN_DATABASE_URL="$url" TERN_LISTEN="127.0.0.1:$port" TERN_LOG=warn
  local org member key contact
  org=$("$tern" admin org create --name bench --plan enterprise | json id)
  "$tern" admin number add --org "$org" --phone-number-id "bench$port" --display-phone-number +14155550100 \
    --waba-id w --access-token t >/dev/null
  member=$("$tern" admin member add --org "$org" --email "b$port@bench.test" --role owner | json id)
  key=$("$tern" admin key create --org "$org" --member "$member" --name b --preset full_access | json key)
  "$tern" serve >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  contact=$(curl -s -X POST "http://127.0.0.1:$port/api/public/v1/contacts" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' -d '{"phone":"+14155550123","name":"Bench"}' | json id)
  for path in "/api/public/v1/phone-numbers" "/api/public/v1/contacts/$contact"; do
    echo "== $name GET ${path%/*}/…"
    wrk -t2 -c32 -d"${secs}s" --latency -H "Authorization: Bearer $key" "http://127.0.0.1:$port$path" \
      | tee "$out/$name-$(basename "${path%/*}").txt" | grep -E 'Requests/sec|50%|99%|Non-2xx'
  done
  echo "peak RSS: $(grep VmHWM /proc/$pid/status | awk '{print $2/1024 " MiB"}')"
  kill -TERM "$pid"; wait "$pid" || true
}

tmp=$(mktemp -d)
run_backend sqlite "sqlite://$tmp/bench.db"
schema="bench_$$"
psql -h 127.0.0.1 -U postgres -d test -qc "CREATE SCHEMA $schema" 
run_backend postgres "postgres://postgres@127.0.0.1:5432/test?sslmode=disable&options=-csearch_path%3D$schema"
psql -h 127.0.0.1 -U postgres -d test -qc "DROP SCHEMA $schema CASCADE"
rm -rf "$tmp"
