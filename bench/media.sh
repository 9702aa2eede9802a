#!/usr/bin/env bash
# Media-upload benchmark (issue 13): concurrent 16 MiB multipart uploads to
# `POST /api/public/v1/media` through a release build of `tern serve` on SQLite, with the
# media store in a directory (TERN_MEDIA_STORE=file://…), against a plain disk write of the
# same bytes in the same run.
#
# Usage: bench/media.sh [rounds, default 3]
#   BENCH_CONCURRENCY=10   uploads at once per round (each a different 16 MiB file)
#
# setup     `tern admin` provisioning (enterprise org, rate limits raised out of the way, an
#           owner, a send_messages key: POST /media needs messages.send), then ROUNDS ×
#           CONCURRENCY files of exactly 16 MiB (16,777,216 bytes) that start with the JPEG/
#           JFIF magic FF D8 FF E0 00 10 'JFIF' 00; the bytes after the header differ per
#           file, so no upload is deduplicated and every one is written to the store.
# per round `sync` (untimed), CONCURRENCY `curl -F file=@…;type=image/jpeg` at once; then
#           `sync` (untimed) and the same files copied CONCURRENCY at a time with
#           `dd bs=1M` into a directory on the same filesystem: the baseline. Neither side
#           fsyncs (Tern does not), so both measure writes into the page cache.
# reported  throughput in MB/s (10^6 bytes; total bytes / wall time of the round, first
#           start to last answer) for Tern and for dd, and their ratio; per-upload latency
#           (curl's time_total) p50/p95/max over all rounds; tern's and the clients' CPU
#           seconds per round; the peak RSS of tern (VmHWM), before the first upload and
#           after every round.
# checks    every answer is 201 with size_bytes 16777216, the file's sha256 and image/jpeg;
#           the store holds exactly one file per upload, 16 MiB each, whose bytes hash to its
#           name, and nothing under tmp/; the database holds one media row per upload.
#           Any failure → exit 1.
# Loopback only; every upload is bounded (curl --max-time 120). Needs ~(ROUNDS+1) ×
# CONCURRENCY × 16 MiB × 2 of free disk under /tmp while it runs; everything is removed at
# the end. Raw output goes to bench/results/media.txt.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3}
conc=${BENCH_CONCURRENCY:-10}
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 ]] || { echo "rounds must be a positive integer" >&2; exit 2; }
[[ $conc =~ ^[0-9]+$ && $conc -ge 1 && $conc -le 100 ]] || { echo "BENCH_CONCURRENCY must be 1 to 100" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target-bench}
tern="$CARGO_TARGET_DIR/release/tern"
out="$root/bench/results"
PNID=109000000000003
APP_SECRET="bench-media-secret-$$"

command -v sqlite3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sqlite3 >/dev/null; }
for t in curl python3 dd sync; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done

tmp=$(mktemp -d /tmp/tern-bench-media.XXXXXX)
pids=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "${pids[@]:-}"; do [[ -n "$p" ]] && kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]:-}"; do [[ -n "$p" ]] && wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$root/bench/lib.sh"
field() { sed -n "s/.*[ ]$1=\([^ ]*\).*/\1/p" <<<" $2"; } # field NAME "RESULT …"

echo "building tern (release, CARGO_TARGET_DIR=$CARGO_TARGET_DIR) …"
cargo build --release -p tern --manifest-path "$root/Cargo.toml" -q
mkdir -p "$out"

need=$(((rounds + 1) * conc * 16 * 2 + 64))
avail=$(df -Pm "$tmp" | awk 'NR==2{print $4}')
[[ $avail -ge $need ]] || { echo "needs ${need} MiB free under /tmp, has ${avail}" >&2; exit 1; }

dir="$tmp/sqlite"
mkdir -p "$dir"
port=$(free_port)
base="http://127.0.0.1:$port"
unset TERN_REDIS_URL TERN_CONFIG
export TERN_DATABASE_URL="sqlite://$dir/tern.db" TERN_LISTEN="127.0.0.1:$port" TERN_PUBLIC_URL="$base" \
  TERN_GRAPH_URL="http://127.0.0.1:9" TERN_APP_SECRET="$APP_SECRET" TERN_VERIFY_TOKEN=bench \
  TERN_SECRET_KEY="bench-secret-key-0123456789abcdef0123456789" \
  TERN_MEDIA_STORE="file://$dir/media" TERN_LOG=warn

org=$("$tern" admin org create --name bench --plan enterprise | json id)
"$tern" admin org update --org "$org" --rate-limit key-minute=1000000000 \
  --rate-limit tenant-minute=1000000000 --rate-limit key-day=1000000000 \
  --rate-limit tenant-day=1000000000 >/dev/null
"$tern" admin number add --org "$org" --phone-number-id "$PNID" --display-phone-number +14155550100 \
  --waba-id waba --access-token token >/dev/null
member=$("$tern" admin member add --org "$org" --email "owner@bench.test" --role owner | json id)
key=$("$tern" admin key create --org "$org" --member "$member" --name bench --preset send_messages | json key)

echo "writing $((rounds * conc)) files of 16 MiB …"
python3 "$root/bench/media.py" gen "$tmp/files" "$rounds" "$conc"

"$tern" serve >"$dir/tern.log" 2>&1 &
tern_pid=$!
pids+=("$tern_pid")
up=0
for _ in $(seq 1 200); do curl -sf -o /dev/null "$base/readyz" && { up=1; break; }; sleep 0.05; done
[[ $up == 1 ]] || { echo "tern serve did not come up; last log lines:" >&2; tail -n 20 "$dir/tern.log" >&2; exit 1; }

echo
echo "=== sqlite, file store: $rounds rounds × $conc concurrent uploads of 16 MiB; $(nproc) cores ==="
rc=0
python3 "$root/bench/media.py" run "$base" "$key" "$tmp/files" "$tmp/copies" "$rounds" "$conc" \
  "$tern_pid" "$dir/media" | tee "$out/media.txt" || rc=$?
res=$(grep '^RESULT' "$out/media.txt" || true)
[[ -n $res ]] || { echo "no RESULT line" >&2; exit 1; }

rows=$(sqlite3 -batch -noheader "$dir/tern.db" "SELECT count(*) || ' rows, ' || coalesce(sum(size_bytes), 0) || ' bytes' FROM media")
echo "   database: media $rows (want $((rounds * conc)) rows, $((rounds * conc * 16777216)) bytes)"
[[ $rows == "$((rounds * conc)) rows, $((rounds * conc * 16777216)) bytes" ]] || rc=1
if grep -qE '"level":"ERROR"|panicked' "$dir/tern.log"; then
  echo "   tern logged errors:"; grep -E '"level":"ERROR"|panicked' "$dir/tern.log" | head -5 | sed 's/^/     /'
  rc=1
fi

echo
echo "=== summary: $(nproc) cores, $rounds × $conc uploads of 16 MiB, $(date -u +%FT%TZ) ==="
echo "tern upload   $(field tern_mbs "$res") MB/s   (rounds: $(field tern_rounds "$res" | tr , ' '))"
echo "dd baseline   $(field dd_mbs "$res") MB/s   (rounds: $(field dd_rounds "$res" | tr , ' '))"
echo "tern / dd     $(field ratio "$res")"
echo "latency       p50 $(field p50_s "$res") s · p95 $(field p95_s "$res") s · max $(field max_s "$res") s ($(field uploads "$res") uploads)"
echo "peak RSS      $(field hwm_mib "$res") MiB (VmHWM; $(field hwm_start_mib "$res") MiB before the first upload; target ≤ 200 MB)"
if [[ $rc != 0 ]]; then
  echo "FAIL: see the PROBLEM lines above" >&2
fi
exit "$rc"
