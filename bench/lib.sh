# Shell helpers shared by the bench scripts (sourced: `. "$root/bench/lib.sh"`).
# A free TCP port on loopback.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# A top-level field of the JSON on stdin.
json() { python3 -c "import sys,json; print(json.load(sys.stdin)[\"$1\"])"; }
# Waits for URL to answer (10 s), else prints the last lines of LOG and exits.
wait_http() { # url what log
  for _ in $(seq 1 200); do curl -sf -o /dev/null "$1" && return 0; sleep 0.05; done
  echo "$2 did not come up ($1); last log lines:" >&2
  tail -n 20 "$3" >&2 || true
  exit 1
}
# CPU snapshot: the machine's busy/total ticks and every process's utime+stime (JSON).
cpu_snapshot() {
  python3 -c '
import json, os, sys
snap = {"procs": {}}
with open("/proc/stat") as f:
    v = [int(x) for x in f.readline().split()[1:]]
busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]  # user nice system irq softirq steal
snap["machine"] = [busy, busy + v[3] + v[4]]     # + idle iowait
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        continue
    rest = st[st.rindex(")") + 2:].split()
    snap["procs"][pid] = [st[st.index("(") + 1:st.rindex(")")], cmd[:100], int(rest[11]) + int(rest[12])]
json.dump(snap, sys.stdout)'
}

# Peak resident set (VmHWM) of process $1, in MiB.
hwm_mib() { awk '/VmHWM/{printf "%.1f", $2/1024}' "/proc/$1/status"; }
# Cleanup of a bench script (trap it on EXIT): stops the children in `pids`, drops the
# PostgreSQL database `pg_db` if one is left, removes `tmp`; keeps the exit status.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "${pids[@]:-}"; do [[ -n "$p" ]] && kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]:-}"; do [[ -n "$p" ]] && wait "$p" 2>/dev/null || true; done
  if [[ -n "${pg_db:-}" ]]; then
    psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
  exit "$rc"
}
# run_backends PREFIX: `run_backend NAME URL` for each of $backends, on a fresh SQLite file or
# a fresh PostgreSQL database named PREFIX_<pid> (dropped afterwards).
run_backends() {
  local b
  for b in $backends; do
    case $b in
      sqlite) run_backend sqlite "sqlite://$tmp/bench.db" ;;
      postgres)
        pg_db="$1_$$"
        psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE $pg_db" >/dev/null
        run_backend postgres "postgres://postgres@127.0.0.1:5432/$pg_db?sslmode=disable"
        psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE $pg_db WITH (FORCE)" >/dev/null
        pg_db=""
        ;;
      *) echo "unknown backend $b (sqlite, postgres)" >&2; exit 2 ;;
    esac
  done
}
