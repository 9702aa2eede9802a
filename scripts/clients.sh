#!/usr/bin/env bash
# Proof by real generators: generates a Python client (openapi-python-client) and a
# TypeScript client (openapi-typescript + openapi-fetch) from the OpenAPI document a live
# `tern serve` serves, type-checks hand-written quickstarts against them (mypy --strict,
# tsc --strict; no casts, no Any) and runs both against the server, whose network is a real
# `tern simulator` calling back with statuses.
# Usage: scripts/clients.sh [path/to/tern]
# Needs python3; installs Node.js and npm (Debian's packages) when missing, the pinned
# generators into .venv (pip) and tests/clients/ts/node_modules (npm ci).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tern=${1:-$root/target/debug/tern}
tern=$(cd "$(dirname "$tern")" && pwd)/$(basename "$tern")
venv=${TERN_VENV:-$root/.venv}
clients=$root/tests/clients
py_pins=(openapi-python-client==0.29.1 mypy==2.4.1)
step() { printf '\n== %s\n' "$*"; }

[[ -x $tern ]] || { echo "clients.sh: no tern binary at $tern" >&2; exit 1; }

# ---- dependencies (pinned) -------------------------------------------------------------------
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/pip" show -q openapi-python-client mypy >/dev/null 2>&1 \
  || [[ $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("openapi-python-client"), m.version("mypy"))') \
        != "${py_pins[0]#*==} ${py_pins[1]#*==}" ]]; then
  step "pip install ${py_pins[*]}"
  "$venv/bin/pip" install -q "${py_pins[@]}"
fi
# Node.js and npm from Debian's packages when the machine has none (as services.sh does for
# PostgreSQL and Redis); tested with Node 20.
if ! command -v npm >/dev/null 2>&1; then
  step "apt-get install nodejs npm"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
# npm ci when node_modules is absent or older than the lock file.
if [[ ! -f $clients/ts/node_modules/.package-lock.json \
   || $clients/ts/package-lock.json -nt $clients/ts/node_modules/.package-lock.json ]]; then
  step "npm ci (tests/clients/ts)"
  (cd "$clients/ts" && npm ci --no-audit --no-fund)
fi

# ---- a real network simulator and server -----------------------------------------------------
work=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
simport=$(free_port)
pids=()
cleanup() {
  status=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ $status -ne 0 ]]; then
    for f in "$work"/sim.log "$work"/serve.log; do
      [[ -s $f ]] && { echo "---- tail of $(basename "$f")"; tail -n 30 "$f"; }
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

base="http://127.0.0.1:$port"
sim="http://127.0.0.1:$simport"
app_secret="clients-app-secret-$RANDOM$RANDOM"
pnid=100000000000001 display=+14155550100 waba=200000000000001 token=clients-access-token
customer=14155550123

export TERN_DATABASE_URL="sqlite://$work/tern.db" TERN_LISTEN="127.0.0.1:$port" TERN_LOG=warn
export TERN_MEDIA_STORE="file://$work/media" TERN_GRAPH_URL="$sim" TERN_APP_SECRET="$app_secret"
json() { python3 -c "import sys,json; print(json.load(sys.stdin)[\"$1\"])"; }
wait_for() { # URL
  for _ in $(seq 1 150); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done
  echo "clients.sh: $1 did not answer" >&2; return 1
}

step "tern simulator on $sim, tern serve on $base"
"$tern" simulator --listen "127.0.0.1:$simport" --app-secret "$app_secret" --seed 17 \
  --callback-url "$base/webhooks/whatsapp" \
  --number "$pnid:$display:$waba:$token" >"$work/sim.log" 2>&1 &
pids+=($!)
wait_for "$sim/_sim/health"

# Provisioning, as an operator would (demo.rs does the same in-process).
org=$("$tern" admin org create --name "Client check" | json id)
"$tern" admin org update --org "$org" --wallet-balance-minor 100000 >/dev/null
"$tern" admin number add --org "$org" --phone-number-id "$pnid" --display-phone-number "$display" \
  --waba-id "$waba" --access-token "$token" >/dev/null
member=$("$tern" admin member add --org "$org" --email owner@clients.example --role owner | json id)
key=$("$tern" admin key create --org "$org" --member "$member" --name clients --preset full_access | json key)
# An approved template on the network, brought in by the sync.
curl -sf -X POST "$sim/_sim/templates" -H 'Content-Type: application/json' -d @- >/dev/null <<EOF
{"waba_id": "$waba", "name": "order_shipped", "language": "en_US", "category": "UTILITY",
 "status": "APPROVED", "components": [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped.",
 "example": {"body_text": [["Ada", "A-1001"]]}}]}
EOF
echo "template sync: $("$tern" admin template sync --org "$org")"

"$tern" serve >"$work/serve.log" 2>&1 &
pids+=($!)
wait_for "$base/readyz"

# A customer writes in, which opens the 24-hour window; wait until Tern has the inbound.
curl -sf -X POST "$sim/_sim/inbound" -H 'Content-Type: application/json' -d @- >/dev/null <<EOF
{"phone_number_id": "$pnid", "from": "$customer", "profile_name": "Ada Lovelace",
 "type": "text", "text": {"body": "Hi! Where is my order?"}}
EOF
for i in $(seq 1 100); do
  page=$(curl -sf "$base/api/public/v1/conversations" -H "Authorization: Bearer $key" || true)
  [[ $page == *'"window_state":"open"'* ]] && break
  [[ $i == 100 ]] && { echo "clients.sh: the inbound message never opened a window" >&2; exit 1; }
  sleep 0.1
done
echo "org $org; customer +$customer wrote in (window open)"

# ---- the served document ---------------------------------------------------------------------
step "GET $base/api/public/v1/openapi.json"
curl -sf "$base/api/public/v1/openapi.json" -o "$work/openapi.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['openapi'], len(d['paths']), 'paths', len(d['components']['schemas']), 'schemas')" "$work/openapi.json"

# Every failing step is reported and the script goes on (so one run shows every problem);
# the exit status is non-zero when any step failed.
failures=()
failed() { failures+=("$1"); echo "FAILED: $1"; }

# ---- Python: openapi-python-client + mypy --strict -------------------------------------------
py=$clients/py
step "openapi-python-client $("$venv/bin/openapi-python-client" --version | awk '{print $NF}')"
rm -rf "$py/generated"
mkdir -p "$py/generated"
# Its post hooks run ruff, installed beside it in the venv.
PATH="$venv/bin:$PATH" "$venv/bin/openapi-python-client" generate --path "$work/openapi.json" \
  --config "$py/generator.yaml" --meta none --output-path "$py/generated/tern_client" 2>&1 \
  || failed "openapi-python-client"
"$venv/bin/python" "$py/patch_generated.py" "$py/generated/tern_client"
echo "generated: $(find "$py/generated/tern_client/models" -name '*.py' | wc -l) model modules, $(find "$py/generated/tern_client/api" -name '*.py' ! -name '__init__.py' | wc -l) operation modules"
step "mypy --strict tests/clients/py/quickstart.py (and the generated package it imports)"
# Errors inside the generated package that are the generator's own bugs, whatever the
# document says, are listed in known-generator-bugs.txt (one regex a line) and tolerated;
# any other error fails the check.
(cd "$py" && MYPYPATH="$py/generated" "$venv/bin/mypy" --strict --no-incremental \
  --cache-dir /dev/null --no-error-summary quickstart.py) >"$work/mypy.txt" 2>&1 || true
grep -v -E -f <(grep -v '^#' "$py/known-generator-bugs.txt" | grep .) "$work/mypy.txt" >"$work/mypy-blocking.txt" || true
known=$(( $(wc -l <"$work/mypy.txt") - $(wc -l <"$work/mypy-blocking.txt") ))
cat "$work/mypy-blocking.txt"
echo "mypy: $(grep -c ': error:' "$work/mypy-blocking.txt" || true) blocking error(s); $known tolerated error(s) in generated code (known generator bugs, see tests/clients/py/known-generator-bugs.txt)"
grep -q ': error:' "$work/mypy-blocking.txt" && failed "mypy --strict (python quickstart)"

# ---- TypeScript: openapi-typescript + openapi-fetch + tsc --strict ---------------------------
ts=$clients/ts
step "openapi-typescript $(cd "$ts" && node -p 'require("openapi-typescript/package.json").version')"
rm -rf "$ts/generated" "$ts/build"
(cd "$ts" && node gen.mjs "$work/openapi.json" generated/schema.d.ts) || failed "openapi-typescript"
step "tsc --strict --noEmit tests/clients/ts/quickstart.ts"
(cd "$ts" && node_modules/.bin/tsc -p tsconfig.json --strict --noEmit) && echo "tsc: no errors" \
  || failed "tsc --strict (typescript quickstart)"

# ---- run both against the live server --------------------------------------------------------
export TERN_BASE_URL="$base/api/public/v1" TERN_API_KEY="$key" TERN_CUSTOMER="+$customer"
export TERN_SAMPLE_IMAGE="$clients/parcel.png"
step "run tests/clients/py/quickstart.py"
PYTHONPATH="$py/generated" timeout 180 "$venv/bin/python" "$py/quickstart.py" \
  || failed "python quickstart run"
step "run tests/clients/ts/quickstart.ts (tsc → node $(node --version))"
# Emitted even when the type-check failed, so that the run shows what works.
(cd "$ts" && node_modules/.bin/tsc -p tsconfig.json --noCheck --noEmitOnError false \
  && timeout 180 node build/quickstart.js) || failed "typescript quickstart run"

if (( ${#failures[@]} )); then
  step "clients.sh: ${#failures[@]} failure(s): $(IFS=,; echo "${failures[*]}" | sed 's/,/, /g')"
  exit 1
fi
step "clients.sh: both generated clients type-check strictly and work against tern serve"
