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
