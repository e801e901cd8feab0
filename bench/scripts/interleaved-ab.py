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

With `--repeat N` each process answers the lines N times and only the last
pass is timed (the earlier ones warm its mappings and caches, as the
comparisons' warm-up passes do). With `--abba` a round runs A B B A (and
the next B A A B), so that drift within a round cancels too; its ratio is
the sum of both A runs over both B runs. Answers (hits, scores, counts) of
A's and B's first runs are compared and the number that differ reported.

usage: interleaved-ab.py A_BIN A_INDEX B_BIN B_INDEX LINES [--rounds 10] [--repeat 1] [--abba] [--out FILE.md]
"""

import argparse
import json
import math
import statistics
import subprocess
from collections import defaultdict


def run(binary, index, lines, repeat=1, answers=None):
    """Per (mode, category): the sum of elapsed_us over the lines (of the
    last of `repeat` passes); each answer without its time is appended to
    `answers` when given."""
    text = "".join(f"{m}\t{q}\n" for m, q, _ in lines) * repeat
    out = subprocess.run([binary, "query-stream", index], input=text, capture_output=True, text=True, check=True)
    got = out.stdout.splitlines()
    if len(got) != len(lines) * repeat:
        raise RuntimeError(f"{binary}: {len(got)} answers to {len(lines) * repeat} lines")
    sums = defaultdict(int)
    for (m, _, c), a in zip(lines, got[-len(lines):]):
        v = json.loads(a)
        if v.get("error"):
            raise RuntimeError(f"{binary}: {v['error']}")
        sums[(m, c)] += v.pop("elapsed_us")
        if answers is not None:
            answers.append(json.dumps(v, sort_keys=True))
    return sums


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a_bin")
    ap.add_argument("a_index")
    ap.add_argument("b_bin")
    ap.add_argument("b_index")
    ap.add_argument("lines")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--abba", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    lines = []
    for l in open(a.lines):
        parts = l.rstrip("\n").split("\t")
        if len(parts) >= 2:
            lines.append((parts[0], parts[1], parts[2] if len(parts) > 2 else "commands"))
    answers_a, answers_b = [], []
    run(a.a_bin, a.a_index, lines, a.repeat, answers_a)  # warm-up
    run(a.b_bin, a.b_index, lines, a.repeat, answers_b)
    differ = sum(1 for x, y in zip(answers_a, answers_b) if x != y)
    ratios = defaultdict(list)
    totals = []
    for r in range(a.rounds):
        order = "AB" if not a.abba else ("ABBA" if r % 2 == 0 else "BAAB")
        x, y = defaultdict(int), defaultdict(int)
        for side in order:
            got = run(a.a_bin, a.a_index, lines, a.repeat) if side == "A" else run(a.b_bin, a.b_index, lines, a.repeat)
            for k, v in got.items():
                (x if side == "A" else y)[k] += v
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
        f"{len(lines)} lines, {a.rounds} interleaved rounds{' (ABBA)' if a.abba else ''} after one warm-up each, "
        f"each process answering them {a.repeat} time(s), the last timed; engine-timed "
        "(`elapsed_us`), per (mode, category) the median of the rounds' paired ratios.\n\n"
        + "\n".join(rows)
        + f"\n\nWhole workload A/B: median {statistics.median(totals):.3f} (min {min(totals):.3f}, "
        f"max {max(totals):.3f}); geometric mean of the category medians {gm:.3f}; "
        f"{within} of {len(medians)} within ±5%. Answers that differ between A and B: {differ} of {len(lines)}.\n"
    )
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
