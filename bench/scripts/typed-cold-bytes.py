#!/usr/bin/env python3
"""Cold device bytes of typed queries (issue #21, "read as needed").

Each query of a `tierdex-bench limited --typed` run (its limited.json) is
answered by a fresh `tierdex query-stream --tier direct` process in a
memory-limited cgroup (v1), so that nothing it reads is cached: the device
bytes it causes (`read_bytes` of /proc/<pid>/io, after opening the index and
answering a probe) are what that query alone needs. Filtered queries are
reported next to the same text queries without their filter
(`unfiltered-<level>-<kind>`), with the ratio of the means.

usage: typed-cold-bytes.py LIMITED_JSON INDEX_DIR [--tierdex BIN]
       [--memory-mb 256] [--pool-mb 128] [--out FILE.md]
"""

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict

PROBE = "COUNT\tzqxjkvtierdexopenprobe\n"
CGROUP = "/sys/fs/cgroup/memory/tierdex-typed-cold"


def read_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    raise RuntimeError("no read_bytes")


def cold_bytes(binary, index, line, pool_mb, cgroup):
    pre = f"echo $$ > {cgroup}/tasks; " if cgroup else ""
    cmd = f"{pre}exec {binary} query-stream {index} --tier direct --pool-bytes {pool_mb}M"
    p = subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        p.stdin.write(PROBE)
        p.stdin.flush()
        p.stdout.readline()
        before = read_bytes(p.pid)
        p.stdin.write(line + "\n")
        p.stdin.flush()
        answer = json.loads(p.stdout.readline())
        after = read_bytes(p.pid)
        if answer.get("error"):
            raise RuntimeError(f"query failed: {answer['error']}: {line}")
        return after - before
    finally:
        p.stdin.close()
        p.wait()


def memory_cgroup(memory_mb):
    """A cgroup v1 memory group limited to `memory_mb` (None without v1)."""
    if not os.path.isdir("/sys/fs/cgroup/memory"):
        print("no cgroup v1 memory controller: running without a memory limit", file=sys.stderr)
        return None
    os.makedirs(CGROUP, exist_ok=True)
    with open(f"{CGROUP}/memory.limit_in_bytes", "w") as f:
        f.write(str(memory_mb << 20))
    return CGROUP


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("limited_json")
    ap.add_argument("index")
    ap.add_argument("--tierdex", default="target/release/tierdex")
    ap.add_argument("--memory-mb", type=int, default=256)
    ap.add_argument("--pool-mb", type=int, default=128)
    ap.add_argument("--out")
    a = ap.parse_args()

    cgroup = memory_cgroup(a.memory_mb)

    queries = json.load(open(a.limited_json))["queries"]
    by_cat = defaultdict(list)
    for i, q in enumerate(queries):
        b = cold_bytes(a.tierdex, a.index, f"{q['mode']}\t{q['text']}", a.pool_mb, cgroup)
        by_cat[q["category"]].append(b)
        print(f"\r{i + 1}/{len(queries)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    if cgroup:
        os.rmdir(cgroup)

    mean = {c: sum(v) / len(v) for c, v in by_cat.items()}
    lines = [
        f"Cold device bytes per query: a fresh `tierdex query-stream --tier direct --pool-bytes {a.pool_mb}M` "
        f"per query, in a {a.memory_mb} MiB memory cgroup, bytes after opening the index "
        "(`read_bytes` of /proc/<pid>/io; O_DIRECT reads, no page cache, no read-ahead).",
        "",
        "| filter category | queries | filtered KiB/query | same text unfiltered KiB/query | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for c in sorted(mean):
        if not c.startswith("filter-"):
            continue
        twin = "unfiltered-" + c[len("filter-"):]
        if twin in mean:
            r = mean[c] / mean[twin] if mean[twin] else float("nan")
            lines.append(f"| {c} | {len(by_cat[c])} | {mean[c] / 1024:.1f} | {mean[twin] / 1024:.1f} | {r:.2f} |")
    lines += ["", "| other category | queries | KiB/query |", "|---|---:|---:|"]
    for c in sorted(mean):
        if not c.startswith(("filter-", "unfiltered-")):
            lines.append(f"| {c} | {len(by_cat[c])} | {mean[c] / 1024:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
