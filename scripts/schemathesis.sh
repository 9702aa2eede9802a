#!/usr/bin/env bash
# Runs schemathesis against a real `tern serve` (SQLite, fresh data) with a full-access key.
# Usage: scripts/schemathesis.sh [path/to/tern] [max seconds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tern=${1:-$root/target/debug/tern}
max_time=${2:-120}
venv=${TERN_VENV:-$root/.venv}
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
simport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export TERN_DATABASE_URL="sqlite://$work/st.db" TERN_LISTEN="127.0.0.1:$port" TERN_LOG=warn
export TERN_MEDIA_STORE="file://$work/media"
# The network is the simulator (template submission reaches it), with the number below.
export TERN_GRAPH_URL="http://127.0.0.1:$simport"
json() { python3 -c "import sys,json; print(json.load(sys.stdin)[\"$1\"])"; }

org=$("$tern" admin org create --name "Schemathesis" | json id)
# The run sends far more requests a minute than the default plan's quotas allow; a 429 is
# documented, but every operation's own answers are what is being checked.
"$tern" admin org update --org "$org" --rate-limit key-minute=100000000 --rate-limit tenant-minute=100000000 \
  --rate-limit key-day=100000000 --rate-limit tenant-day=100000000 >/dev/null
"$tern" admin number add --org "$org" --phone-number-id 100000000000001 \
  --display-phone-number +14155550100 --waba-id 200000000000001 --access-token st-token >/dev/null
member=$("$tern" admin member add --org "$org" --email st@example.com --role owner | json id)
key=$("$tern" admin key create --org "$org" --member "$member" --name st --preset full_access | json key)

"$tern" simulator --listen "127.0.0.1:$simport" --app-secret st-secret \
  --number 100000000000001:+14155550100:200000000000001:st-token >"$work/sim.log" 2>&1 &
simpid=$!
"$tern" serve >"$work/serve.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" "$simpid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.1
done

"$venv/bin/schemathesis" run "http://127.0.0.1:$port/api/public/v1/openapi.json" \
  --url "http://127.0.0.1:$port/api/public/v1" \
  -H "Authorization: Bearer $key" \
  --checks all --max-time "$max_time" --seed 1 --no-color

kill -TERM "$pid"
wait "$pid"
echo "schemathesis: server exited cleanly"
