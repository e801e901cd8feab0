#!/usr/bin/env python3
"""Interleaved old-against-new comparison of two tierdex builds, per category.

Two `tierdex query-stream` processes (A: a build and its index, B: another
build and its own index) answer the same `MODE<TAB>QUERY<TAB>CATEGORY`
lines in turn, A B A B ..., for several rounds. Each answer carries the
engine's own time (`elapsed_us`); per round and (mode, category) the sum of
A's times over B's is one paired ratio, and the median of the rounds is
reported (with min and max). On a shared, drifting machine, pairing
neighbouring rounds cancels the drift that makes sequential runs (one engine
after the other) disagree.

usage: interleaved-ab.py A_BIN A_INDEX B_BIN B_INDEX LINES [--rounds 10] [--out FILE.md]
"""

import argparse
import json
import math
import statistics
import subprocess
from collections import defaultdict


def run(binary, index, lines):
    """Per (mode, category): the sum of elapsed_us over the lines."""
    text = "".join(f"{m}\t{q}\n" for m, q, _ in lines)
    out = subprocess.run([binary, "query-stream", index], input=text, capture_output=True, text=True, check=True)
    answers = out.stdout.splitlines()
    if len(answers) != len(lines):
        raise RuntimeError(f"{binary}: {len(answers)} answers to {len(lines)} lines")
    sums = defaultdict(int)
    for (m, _, c), a in zip(lines, answers):
        v = json.loads(a)
        if v.get("error"):
            raise RuntimeError(f"{binary}: {v['error']}")
        sums[(m, c)] += v["elapsed_us"]
    return sums


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a_bin")
    ap.add_argument("a_index")
    ap.add_argument("b_bin")
    ap.add_argument("b_index")
    ap.add_argument("lines")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--out")
    a = ap.parse_args()
    lines = []
    for l in open(a.lines):
        parts = l.rstrip("\n").split("\t")
        if len(parts) >= 2:
            lines.append((parts[0], parts[1], parts[2] if len(parts) > 2 else "commands"))
    run(a.a_bin, a.a_index, lines)  # warm-up
    run(a.b_bin, a.b_index, lines)
    ratios = defaultdict(list)
    totals = []
    for _ in range(a.rounds):
        x = run(a.a_bin, a.a_index, lines)
        y = run(a.b_bin, a.b_index, lines)
        for k in x:
            if y[k] > 0:
                ratios[k].append(x[k] / y[k])
        totals.append(sum(x.values()) / sum(y.values()))
    n = defaultdict(int)
    for m, _, c in lines:
        n[(m, c)] += 1
    rows = [
        "| mode | category | queries | A/B median | min | max |",
        "|---|---|---:|---:|---:|---:|",
    ]
    medians = []
    for k in sorted(ratios):
        r = ratios[k]
        med = statistics.median(r)
        medians.append(med)
        rows.append(f"| {k[0]} | {k[1]} | {n[k]} | {med:.3f} | {min(r):.3f} | {max(r):.3f} |")
    within = sum(1 for m in medians if 0.95 <= m <= 1.05)
    gm = math.exp(sum(math.log(m) for m in medians) / len(medians))
    text = (
        f"A = `{a.a_bin}` on `{a.a_index}`; B = `{a.b_bin}` on `{a.b_index}`; "
        f"{len(lines)} lines, {a.rounds} interleaved rounds after one warm-up each; engine-timed "
        "(`elapsed_us`), per (mode, category) the median of the rounds' paired ratios.\n\n"
        + "\n".join(rows)
        + f"\n\nWhole workload A/B: median {statistics.median(totals):.3f} (min {min(totals):.3f}, "
        f"max {max(totals):.3f}); geometric mean of the category medians {gm:.3f}; "
        f"{within} of {len(medians)} within ±5%.\n"
    )
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
