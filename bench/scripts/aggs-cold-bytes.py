#!/usr/bin/env python3
"""Cold device bytes of aggregations (issue #22, "read as needed").

For each filtered query of a `tierdex-bench limited --typed` run (its
limited.json; `filter-0.1%-*` and `filter-1%-*` by default), and for its
filter alone (a query matching about 0.1% or 1% of the documents), three cold
answers, each by a fresh `tierdex query-stream --tier direct` process in a
memory-limited cgroup (v1), device bytes after opening the index (see
typed-cold-bytes.py):

* the query alone, counted (`size: 0`);
* the query with aggregations over single-valued columns (`terms` on
  `category`, `date_histogram` by month on `date`, `stats` on `price`),
  `size: 0`;
* `match_all` with the same aggregations.

The bound the issue sets, "the pages of the columns its matches touch", is
computed from the matches' document numbers (paged out of the index sorted
by `_doc`) and each column's directory entry at the start of the segment's
`.col` file: the distinct 4 KiB pages of the bit-packed values the matches'
values lie in (a value read as a 16-byte word may reach into the next page:
both are counted), plus the pages of the keyword dictionary that names the
terms buckets. The aggregations' extra bytes (with minus without) are
reported next to that bound.

usage: aggs-cold-bytes.py LIMITED_JSON INDEX_DIR [--tierdex BIN]
       [--memory-mb 256] [--pool-mb 128] [--per-category 5] [--out FILE.md]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from importlib import import_module  # noqa: E402

cold = import_module("typed-cold-bytes")

PAGE = 4096
PAD = 16
AGGS = {
    "by_category": {"terms": {"field": "category", "size": 10}},
    "by_month": {"date_histogram": {"field": "date", "calendar_interval": "month"}},
    "price": {"stats": {"field": "price"}},
}
COLUMNS = ["category", "date", "price"]


def column_dirs(index):
    """Per `.col` file: its directory entries by field id."""
    out = []
    for path in sorted(glob.glob(os.path.join(index, "*.col"))):
        with open(path, "rb") as f:
            head = f.read(1 << 20)
        start = head.index(b"[")
        entries, _ = json.JSONDecoder().raw_decode(head[start:].decode("utf-8", "replace"))
        out.append({e["field"]: e for e in entries})
    return out


def field_ids(index):
    """Field name to id, from the manifest's schema."""
    for name in ("manifest.json", "MANIFEST", "manifest"):
        p = os.path.join(index, name)
        if os.path.exists(p):
            m = json.load(open(p))
            fields = m.get("schema", {}).get("fields") or m.get("fields")
            if fields:
                return {f["name"]: i for i, f in enumerate(fields)}
    return None


def match_docs(binary, index, query):
    """Document numbers of every match of `query` (sorted by `_doc`)."""
    docs = []
    after = None
    while True:
        body = {"query": query, "size": 10000, "sort": ["_doc"]}
        if after is not None:
            body["search_after"] = [after]
        out = subprocess.run(
            [binary, "query-stream", index],
            input=f"TOP_10\t{json.dumps(body)}\n",
            capture_output=True,
            text=True,
            check=True,
        )
        hits = json.loads(out.stdout)["hits"]
        if not hits:
            return docs
        docs.extend(h["sort"][0] for h in hits)
        after = docs[-1]


def touched_pages(docs, entry):
    """Distinct pages of the packed values array that `docs` read."""
    v = entry.get("values")
    if not v or entry.get("multi"):
        return None
    bits = v["bits"]
    pages = set()
    for d in docs:
        start = d * bits // 8
        pages.add(start // PAGE)
        pages.add((start + PAD - 1) // PAGE)
    return len(pages)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("limited_json")
    ap.add_argument("index")
    ap.add_argument("--tierdex", default="target/release/tierdex")
    ap.add_argument("--memory-mb", type=int, default=256)
    ap.add_argument("--pool-mb", type=int, default=128)
    ap.add_argument("--per-category", type=int, default=5)
    ap.add_argument("--categories", default="filter-0.1%-term,filter-0.1%-and,filter-1%-term,filter-1%-and")
    ap.add_argument("--out")
    a = ap.parse_args()

    cgroup = cold.memory_cgroup(a.memory_mb)

    dirs = column_dirs(a.index)
    if len(dirs) != 1:
        sys.exit(f"expected one segment (a force-merged index), found {len(dirs)} .col files")
    ids = field_ids(a.index)
    entries = {}
    for name in COLUMNS:
        if ids is None or name not in ids:
            sys.exit(f"field {name} not found in the index's manifest")
        entries[name] = dirs[0][ids[name]]

    # The keyword dictionary names the terms buckets: it lies before the
    # column's values and is counted whole, in pages.
    dict_bytes = 0
    for c in COLUMNS:
        d = entries[c].get("dict")
        if d:
            span = entries[c]["values"]["at"] - d["offsets"]["at"]
            dict_bytes += -(-span // PAGE) * PAGE
    wanted = a.categories.split(",")
    # Each filtered query, and its filter alone (a query matching about
    # the filter's share of the documents).
    picked = defaultdict(list)
    for q in json.load(open(a.limited_json))["queries"]:
        if q["category"] in wanted and len(picked[q["category"]]) < a.per_category:
            query = json.loads(q["text"])["query"]
            picked[q["category"]].append(query)
            alone = {"bool": {"filter": query["bool"]["filter"]}}
            picked[q["category"] + " (filter alone)"].append(alone)
    wanted = [c for w in wanted for c in (w + " (filter alone)", w)]

    def bytes_of(body):
        return cold.cold_bytes(a.tierdex, a.index, f"COUNT\t{json.dumps(body)}", a.pool_mb, cgroup)

    all_bytes = bytes_of({"query": {"match_all": {}}, "size": 0, "aggs": AGGS})
    rows = []
    done = 0
    total = sum(len(v) for v in picked.values())
    for cat in wanted:
        for query in picked[cat]:
            docs = match_docs(a.tierdex, a.index, query)
            alone = bytes_of({"query": query, "size": 0})
            with_aggs = bytes_of({"query": query, "size": 0, "aggs": AGGS})
            pages = sum(touched_pages(docs, entries[c]) or 0 for c in COLUMNS)
            rows.append((cat, len(docs), alone, with_aggs, pages * PAGE + dict_bytes))
            done += 1
            print(f"\r{done}/{total}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    if cgroup:
        os.rmdir(cgroup)

    col_bytes = sum(
        (entries[c]["value_count"] if entries[c].get("starts") else 1_000_000) * entries[c]["values"]["bits"] // 8
        for c in COLUMNS
    )
    lines = [
        f"Cold device bytes per query: a fresh `tierdex query-stream --tier direct --pool-bytes {a.pool_mb}M` per "
        f"answer, in a {a.memory_mb} MiB memory cgroup, bytes after opening the index. Aggregations: "
        "`terms` on category, `date_histogram` by month on date, `stats` on price, all with `size: 0`.",
        "",
        f"`match_all` with the aggregations: **{all_bytes / 1024:.0f} KiB** (the three columns' packed values "
        f"are about {col_bytes / 1024:.0f} KiB).",
        "",
        "| category | matches | query alone KiB | with aggs KiB | aggs' extra KiB | pages the matches touch (+ dictionary), KiB | "
        "extra / touched | with aggs / match_all |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    by_cat = defaultdict(list)
    for r in rows:
        by_cat[r[0]].append(r)
    for cat in wanted:
        rs = by_cat[cat]
        if not rs:
            continue
        n = len(rs)
        m = sum(r[1] for r in rs) / n
        alone = sum(r[2] for r in rs) / n
        withb = sum(r[3] for r in rs) / n
        touched = sum(r[4] for r in rs) / n
        extra = withb - alone
        lines.append(
            f"| {cat} ({n} queries) | {m:.0f} | {alone / 1024:.0f} | {withb / 1024:.0f} | {extra / 1024:.0f} | "
            f"{touched / 1024:.0f} | {extra / touched if touched else float('nan'):.2f} | "
            f"{withb / all_bytes:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
