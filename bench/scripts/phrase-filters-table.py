#!/usr/bin/env python3
"""Summarises bench/scripts/phrase-filters.sh runs: per category and engine
pair (with / without filters), device bytes and reads per query, QPS and p50
under the memory limit; p50 and mean latency in memory.

    bench/scripts/phrase-filters-table.py bench/results/NAME-phrase-filters
"""
import json
import os
import sys

base = sys.argv[1]
limited = base + "-256"
ram = sys.argv[2] if len(sys.argv) > 2 else base + "-ram"
pairs = [("tierdex:mmap-adaptive", "tierdex@nobloom:mmap-adaptive", "mmap adaptive"),
         ("tierdex:direct", "tierdex@nobloom:direct", "direct")]


def kib(b):
    return f"{b / 1024:.1f}"


print("Under 256 MiB (cold: page cache dropped, no warm-up, one run per category):\n")
head = "| category | n |"
rule = "|---|---:|"
for _, _, t in pairs:
    head += f" {t}: KiB read / query, with / without (ratio) | {t}: reads / query, with / without | {t}: QPS with / without |"
    rule += "---:|---:|---:|"
print(head)
print(rule)
cats = [c for c in ["pair-10", "pair-100", "pair-1k", "pair-10k", "pair-100k", "phrase-2", "phrase-3",
                    "commands-phrase"] if os.path.exists(f"{limited}/{c}/limited.json")]
for c in cats:
    d = json.load(open(f"{limited}/{c}/limited.json"))
    runs = {r["engine"]: r for r in d["runs"]}
    n = len(d["queries"])
    line = f"| {c} | {n} |"
    for w, wo, _ in pairs:
        a, b = runs[w], runs[wo]
        ba, bb = a["latency"]["read_bytes_per_query"], b["latency"]["read_bytes_per_query"]
        ratio = f"{bb / ba:.2f}x fewer" if ba and bb >= ba else (f"{ba / bb:.2f}x more" if bb else "-")
        ra, rb = a["latency"].get("reads_per_query", 0), b["latency"].get("reads_per_query", 0)
        line += f" {kib(ba)} / {kib(bb)} ({ratio}) | {ra:.1f} / {rb:.1f} | {a['qps']:.0f} / {b['qps']:.0f} |"
    print(line)

if os.path.exists(f"{ram}/limited.json"):
    d = json.load(open(f"{ram}/limited.json"))
    runs = {r["engine"]: r for r in d["runs"]}
    a, b = runs["tierdex:ram"], runs["tierdex@nobloom:ram"]
    print("\nIn memory (ram tier, one run over all categories): mean / p50 latency, with / without filters\n")
    print("| source | category | n | mean µs with / without (ratio) | p50 µs with / without |")
    print("|---|---|---:|---:|---:|")
    cb = {(x["source"], x["category"]): x["summary"] for x in b["by_category"]}
    for x in a["by_category"]:
        s, t = x["summary"], cb[(x["source"], x["category"])]
        print(f"| {x['source']} | {x['category']} | {s['n']} | {s['mean_us']:.0f} / {t['mean_us']:.0f} "
              f"({t['mean_us'] / s['mean_us']:.2f}x) | {s['p50_us']:.0f} / {t['p50_us']:.0f} |")
    print(f"\nWhole run: {a['qps']:.0f} / {b['qps']:.0f} QPS with / without filters.")
