#!/usr/bin/env python3
"""Runs a workload (MODE<TAB>QUERY<TAB>CATEGORY lines) through several engines' query streams (NAME=COMMAND, bench/PROTOCOL.md), passes alternating between engines; prints the mean of each query's minimum elapsed_us per (mode, category) and ratios to the first engine."""
import subprocess, sys, json, collections, os
wl = sys.argv[1]; passes = int(sys.argv[2]); engines = sys.argv[3:]  # name=cmd
lines = [l.rstrip('\n').split('\t') for l in open(wl) if l.strip()]
cmds = dict(e.split('=',1) for e in engines)
procs = {n: subprocess.Popen(c, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1) for n,c in cmds.items()}
best = {n: [1e18]*len(lines) for n in cmds}
counts = {n: [None]*len(lines) for n in cmds}
for p in range(passes):
    for n, pr in procs.items():
        for i,(m,q,c) in enumerate(lines):
            pr.stdin.write(f"{m}\t{q}\n"); pr.stdin.flush()
            a = json.loads(pr.stdout.readline())
            if 'error' in a: best[n][i] = None; continue
            if best[n][i] is not None: best[n][i] = min(best[n][i], a['elapsed_us'])
            counts[n][i] = a.get('count')
json.dump({"lines":lines,"best":best,"counts":counts}, open(os.environ.get("SIDE_BY_SIDE_JSON", "/dev/null"),"w"))
cats = collections.OrderedDict()
for i,(m,q,c) in enumerate(lines): cats.setdefault((m,c), []).append(i)
names = list(cmds)
print("mode\tcat\t" + "\t".join(names) + "\t" + "\t".join(f"{names[0]}/{n}" for n in names[1:]))
for (m,c), ix in cats.items():
    ok = [i for i in ix if all(best[n][i] is not None for n in names)]
    means = [sum(best[n][i] for i in ok)/max(1,len(ok)) for n in names]
    print(f"{m}\t{c}\t" + "\t".join(f"{x:.1f}" for x in means) + "\t" + "\t".join(f"{means[0]/x:.2f}" if x else "-" for x in means[1:]))
