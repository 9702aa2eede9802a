#!/usr/bin/env python3
"""Helper of bench/media.sh (standard library only).

  media.py gen DIR ROUNDS CONC
      Writes ROUNDS × CONC files of exactly 16 MiB: JPEG/JFIF magic (FF D8 FF E0 00 10
      'JFIF' 00), then pseudo-random bytes, with the round and index written just after the
      header so every file differs (no upload is deduplicated). DIR/manifest.json lists
      path and SHA-256 of each.

  media.py run BASE KEY DIR COPYDIR ROUNDS CONC TERN_PID MEDIA_DIR
      Per round: `sync` (untimed, so no earlier dirty data is written back inside the
      window), CONC concurrent `curl` uploads of that round's files to POST /media
      (wall time from the first start to the last answer, and every upload's own time),
      `sync` again, then the same files copied CONC at a time with `dd bs=1M` into COPYDIR
      (the plain disk-write baseline: no fsync, like Tern). Prints one line per round, then
      the checks of every answer and of the stored files, and a final RESULT line.
      Exit status 1 when an answer or a stored file is wrong.
"""

import hashlib
import json
import math
import os
import random
import resource
import subprocess
import sys
import time

SIZE = 16 * 1024 * 1024
MAGIC = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
MB = 1_000_000


def gen(d, rounds, conc):
    os.makedirs(d, exist_ok=True)
    base = bytearray(random.Random(13).randbytes(SIZE))
    base[: len(MAGIC)] = MAGIC
    files = []
    for r in range(rounds):
        for i in range(conc):
            tag = f"tern-bench r{r:03d} i{i:03d} pid{os.getpid()}".encode()
            base[len(MAGIC) : len(MAGIC) + len(tag)] = tag
            path = os.path.join(d, f"r{r}_{i}.jpg")
            with open(path, "wb") as f:
                f.write(base)
            files.append({"round": r, "i": i, "path": path, "sha256": hashlib.sha256(base).hexdigest()})
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(files, f)


def proc_cpu(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read()
    rest = st[st.rindex(")") + 2 :].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def rank(v, p):
    """Nearest-rank percentile of a sorted list."""
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]


def run_all(cmds):
    """Starts every command at once; returns (wall seconds, [(rc, stdout)])."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for c in cmds]
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        outs.append((p.returncode, out.decode(errors="replace"), err.decode(errors="replace")))
    return time.perf_counter() - t0, outs


def run(base, key, d, copydir, rounds, conc, tern_pid, media_dir):
    with open(os.path.join(d, "manifest.json")) as f:
        files = json.load(f)
    os.makedirs(copydir, exist_ok=True)
    url = f"{base}/api/public/v1/media"
    problems = []
    latencies = []
    tern_rows, base_rows = [], []
    answers = {}  # sha256 → media_id
    hwm_start = hwm_mib(tern_pid)
    print(f"   tern VmHWM before the first upload: {hwm_start:.1f} MiB")
    for r in range(rounds):
        mine = [f for f in files if f["round"] == r]
        nbytes = SIZE * len(mine)
        subprocess.run(["sync"], check=True)
        cmds = []
        for i, f in enumerate(mine):
            cmds.append([
                "curl", "-sS", "--max-time", "120", "-o", os.path.join(d, f"answer_{r}_{i}.json"),
                "-w", "%{http_code} %{time_total} %{size_upload}",
                "-H", f"Authorization: Bearer {key}",
                "-H", "Expect:",  # no 100-continue round trip
                "-F", f"file=@{f['path']};type=image/jpeg;filename=bench_{r}_{i}.jpg",
                url,
            ])
        cpu0, kids0 = proc_cpu(tern_pid), children_cpu()
        wall, outs = run_all(cmds)
        tern_cpu, curl_cpu = proc_cpu(tern_pid) - cpu0, children_cpu() - kids0
        for i, ((rc, out, err), f) in enumerate(zip(outs, mine)):
            parts = out.split()
            code = parts[0] if parts else "000"
            if rc != 0 or code != "201":
                body = ""
                try:
                    with open(os.path.join(d, f"answer_{r}_{i}.json")) as fh:
                        body = fh.read(300)
                except OSError:
                    pass
                problems.append(f"round {r + 1} upload {i}: curl rc={rc} HTTP {code} {err.strip()} {body}")
                continue
            latencies.append(float(parts[1]))
            with open(os.path.join(d, f"answer_{r}_{i}.json")) as fh:
                a = json.load(fh)
            if a.get("size_bytes") != SIZE or a.get("sha256") != f["sha256"] or a.get("mime_type") != "image/jpeg":
                problems.append(f"round {r + 1} upload {i}: answer {a}")
            answers[f["sha256"]] = a.get("media_id")
        hwm = hwm_mib(tern_pid)
        ok = sum(1 for rc, out, _ in outs if rc == 0 and out.split()[:1] == ["201"])
        tern_rows.append((nbytes, wall))
        print(f"   round {r + 1}: tern   {nbytes / MB / wall:7.1f} MB/s  wall {wall:6.3f} s  "
              f"{ok}/{len(mine)} answered 201  tern CPU {tern_cpu:.2f} s  curl CPU {curl_cpu:.2f} s  "
              f"VmHWM {hwm:.1f} MiB")

        subprocess.run(["sync"], check=True)
        cmds = [["dd", f"if={f['path']}", f"of={os.path.join(copydir, f'copy_{i}')}", "bs=1M", "status=none"]
                for i, f in enumerate(mine)]
        kids0 = children_cpu()
        bwall, bouts = run_all(cmds)
        dd_cpu = children_cpu() - kids0
        for i, (rc, _, err) in enumerate(bouts):
            if rc != 0:
                problems.append(f"round {r + 1} dd {i}: rc={rc} {err.strip()}")
        base_rows.append((nbytes, bwall))
        print(f"   round {r + 1}: dd     {nbytes / MB / bwall:7.1f} MB/s  wall {bwall:6.3f} s  "
              f"dd CPU {dd_cpu:.2f} s  → tern/dd {bwall / wall:.2f}")
        for i in range(len(mine)):
            os.remove(os.path.join(copydir, f"copy_{i}"))

    # --- the stored files: one per upload, 16 MiB, named and hashed as answered ----------------
    stored = {}
    leftover_tmp = 0
    for root, _, names in os.walk(media_dir):
        for n in names:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, media_dir)
            if rel.startswith("tmp" + os.sep):
                leftover_tmp += 1
            else:
                stored[n] = p
    want = {f["sha256"] for f in files}
    if set(stored) != want:
        problems.append(f"stored files: {len(stored)} (want {len(want)}); "
                        f"missing {len(want - set(stored))}, unexpected {len(set(stored) - want)}")
    bad_size = bad_hash = 0
    for sha, p in stored.items():
        if os.path.getsize(p) != SIZE:
            bad_size += 1
            continue
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        if h.hexdigest() != sha:
            bad_hash += 1
    if bad_size or bad_hash:
        problems.append(f"stored files: {bad_size} not {SIZE} bytes, {bad_hash} whose bytes do not hash to their name")
    if leftover_tmp:
        problems.append(f"{leftover_tmp} temporary objects left under tmp/")
    if len(set(answers.values())) != len(files):
        problems.append(f"{len(set(answers.values()))} distinct media ids for {len(files)} uploads")
    total_size = sum(os.path.getsize(p) for p in stored.values())
    print(f"   stored: {len(stored)} files, {total_size} bytes ({len(files)} × {SIZE} expected), "
          f"sha256 verified, {leftover_tmp} left in tmp/")
    for p in problems:
        print(f"   PROBLEM: {p}")

    tb, tw = sum(b for b, _ in tern_rows), sum(w for _, w in tern_rows)
    bb, bw = sum(b for b, _ in base_rows), sum(w for _, w in base_rows)
    lat = sorted(latencies)
    tern_mbs, base_mbs = tb / MB / tw, bb / MB / bw
    p50, p95, mx = (rank(lat, 50), rank(lat, 95), lat[-1]) if lat else (float("nan"),) * 3
    rounds_t = " ".join(f"{b / MB / w:.1f}" for b, w in tern_rows)
    rounds_b = " ".join(f"{b / MB / w:.1f}" for b, w in base_rows)
    print(f"RESULT tern_mbs={tern_mbs:.1f} dd_mbs={base_mbs:.1f} ratio={tern_mbs / base_mbs:.2f} "
          f"p50_s={p50:.3f} p95_s={p95:.3f} max_s={mx:.3f} uploads={len(lat)} problems={len(problems)} "
          f"hwm_mib={hwm_mib(tern_pid):.1f} hwm_start_mib={hwm_start:.1f} "
          f"tern_rounds={rounds_t.replace(' ', ',')} dd_rounds={rounds_b.replace(' ', ',')}")
    return 1 if problems else 0


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "gen" and len(sys.argv) == 5:
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "run" and len(sys.argv) == 10:
        a = sys.argv[2:]
        sys.exit(run(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]), a[6], a[7]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
