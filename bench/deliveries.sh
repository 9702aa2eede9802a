# Shell helpers shared by the event-delivery benchmarks (bench/webhooks.sh for Tern,
# bench/svix.sh for svix-server), sourced after bench/lib.sh. The caller sets `root`,
# `wait_max`, `stall`, `problems=()` and `answered` (what one load request is, in a problem's
# words: "changes answered 200", "messages answered 202").

# server_cpu_split NAME EXTRA_COMM BEFORE AFTER SERVER_PID RECEIVER_PID PG_DB CLIENT_SECONDS
# DELIVERIES → one line: shares of all cores' time, and the server's CPU µs per delivery.
# PostgreSQL = its shared processes + backends of the bench database; EXTRA_COMM (e.g.
# redis-server, svix's queue; "" for none) is counted apart; everything else is "other"
# (the top three named).
server_cpu_split() {
  python3 - "$@" <<'PY'
import json, os, sys
server, extra = sys.argv[1], sys.argv[2]
before, after = (json.load(open(f)) for f in sys.argv[3:5])
server_pid, rx_pid, pg_db = sys.argv[5], sys.argv[6], sys.argv[7]
client, deliveries = float(sys.argv[8]), int(sys.argv[9])
hz = os.sysconf("SC_CLK_TCK")
busy = (after["machine"][0] - before["machine"][0]) / hz
total = (after["machine"][1] - before["machine"][1]) / hz  # wall time × cores
extra_name = extra.split("-")[0] if extra else ""
use = {server: 0.0, "postgres": 0.0, "receiver": 0.0}
if extra:
    use[extra_name] = 0.0
others = {}
for pid, (comm, cmd, t) in after["procs"].items():
    d = (t - before["procs"].get(pid, [0, 0, 0])[2]) / hz
    if pid == server_pid:
        use[server] += d
    elif pid == rx_pid:
        use["receiver"] += d
    elif comm == "postgres" and pg_db and (pg_db in cmd or ("(" not in cmd and "[local]" not in cmd)):
        use["postgres"] += d
    elif extra and comm == extra:
        use[extra_name] += d
    elif d > 0:
        name = {"postgres": "postgres (other dbs)", server: f"another {server}"}.get(comm, comm)
        others[name] = others.get(name, 0.0) + d
other = max(0.0, busy - sum(use.values()) - client)
pct = lambda x: f"{100 * x / total:.0f}%" if total else "?"
top = sorted(others.items(), key=lambda kv: -kv[1])[:3]
named = ", ".join(f"{k} {pct(v)}" for k, v in top if 100 * v / total >= 1)
per = f"{1e6 * use[server] / deliveries:.0f}" if deliveries else "-"
extra_part = f"{extra_name} {pct(use[extra_name])} · " if extra else ""
print(f"{server} {pct(use[server])} · receiver {pct(use['receiver'])} · postgres {pct(use['postgres'])} · "
      f"{extra_part}clients {pct(client)} · other {pct(other)}{' (' + named + ')' if named else ''} · "
      f"idle {pct(total - busy)} (of {os.cpu_count()} cores, {total / (os.cpu_count() or 1):.1f} s) · "
      f"{server} {per} µs CPU per delivery")
PY
}
# host_speed → seconds a fixed single-threaded Python loop takes (≈0.24 on this machine type).
host_speed() { python3 -c 'import time;t=time.perf_counter();sum(i*i for i in range(3_000_000));print(f"{time.perf_counter()-t:.2f}")'; }
field() { sed -n "s/.*[ ]$1=\([^ ]*\).*/\1/p" <<<" $2"; } # field NAME "RESULT …"
# jget KEY.SUBKEY < stats.json → the value ("-" when null)
jget() { python3 -c "
import json, sys
v = json.load(sys.stdin)
for k in '$1'.split('.'):
    v = v.get(k) if isinstance(v, dict) else None
print('-' if v is None else (f'{v:.0f}' if isinstance(v, float) else v))"; }

problem() { echo "   PROBLEM: $1"; problems+=("$2: $1"); }

# phase_check LABEL DIR RX_CTL SUBS OK RUN → waits for OK × SUBS deliveries, checks them,
# prints a line, leaves the receiver's stats in DIR/LABEL.json and sets ST (the stats JSON
# file). With snap_after_wait set, a CPU snapshot is written there as soon as the wait ends.
ST=""
snap_after_wait=""
phase_check() {
  local label=$1 dir=$2 rx_ctl=$3 n=$4 ok=$5 run=$6
  local expected=$((ok * n)) w
  w=$(python3 "$root/bench/webhooks.py" wait "http://127.0.0.1:$rx_ctl" "$expected" "$wait_max" "$stall")
  [[ -z $snap_after_wait ]] || cpu_snapshot >"$snap_after_wait"
  sleep 0.5 # a late duplicate would arrive now
  ST="$dir/$label.json"
  curl -sf "http://127.0.0.1:$rx_ctl/stats" >"$ST"
  local count ids pairs dups paths bad
  count=$(jget count <"$ST"); ids=$(jget distinct_ids <"$ST"); pairs=$(jget distinct_deliveries <"$ST")
  dups=$(jget duplicates <"$ST"); paths=$(jget paths <"$ST"); bad=$(jget bad <"$ST")
  echo "   $w"
  echo "   received $count (distinct ids $ids, distinct (id, path) $pairs, duplicates $dups, paths $paths, unsigned/no created_at $bad)"
  echo "   latency event → delivery: p50 $(jget latency_ms.p50 <"$ST") ms · p95 $(jget latency_ms.p95 <"$ST") ms · p99 $(jget latency_ms.p99 <"$ST") ms · max $(jget latency_ms.max <"$ST") ms"
  [[ $ids == "$ok" ]] || problem "$label: $ids distinct webhook-ids for $ok $answered" "$run"
  [[ $pairs == "$expected" ]] || problem "$label: $pairs distinct deliveries, $expected expected" "$run"
  [[ $paths == "$n" || $ok == 0 ]] || problem "$label: deliveries reached $paths paths, $n expected" "$run"
  [[ $dups == 0 ]] || problem "$label: $dups duplicate deliveries" "$run"
  [[ $bad == 0 ]] || problem "$label: $bad requests unsigned or without created_at" "$run"
}
