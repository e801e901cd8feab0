#!/usr/bin/env python3
"""Typed-field self-test of a peer engine (bench/PROTOCOL.md, typed fields and
structured queries), shared by the Lucene and tantivy engines' selftest.sh.

    typed_selftest.py [--index-arg ARG]... WORKDIR ENGINE [ENGINE ARGS...]

Writes a small seeded corpus with every typed field (and missing, null, empty
and multi-valued values, dates with offsets and as epoch milliseconds),
indexes it with `ENGINE index`, streams structured queries through `ENGINE
query` (one and two threads) and checks every answer against a brute-force
evaluation of the protocol's semantics written here: exact counts, the
matching ids of unsorted queries, and for sorted queries the sequence of sort
values (ties may come in any order), each hit's own values, and missing
values last. Also checks that bad requests are answered with errors and that
a title/body-only corpus still indexes. Each `--index-arg` is appended to
every `ENGINE index` command (e.g. `--bp`, the Lucene engine's document
reordering). Exits non-zero on any failure.
"""

import json
import os
import random
import re
import subprocess
import sys

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
CATEGORIES = ["books", "music", "garden", "toys", "tools", "Zebra", "\u00e9t\u00e9"]
TAGS = ["new", "sale", "gift", "eco", "rare", "big", "small"]
KEYWORDS = ("category", "tags")
NUMERIC = ("date", "price", "popularity")


def parse_date(s):
    """Epoch millis of the protocol's ISO-8601 grammar (None when invalid)."""
    m = re.fullmatch(
        r"(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})?)?", s
    )
    if not m:
        return None
    y, mo, d = int(m[1]), int(m[2]), int(m[3])
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    dim = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    if not (1 <= mo <= 12 and 1 <= d <= dim[mo - 1]):
        return None
    # days_from_civil
    yy = y - (1 if mo <= 2 else 0)
    era = yy // 400
    yoe = yy - era * 400
    doy = (153 * (mo - 3 if mo > 2 else mo + 9) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    ms = (era * 146097 + doe - 719468) * 86_400_000
    if m[4] is None:
        return ms
    hh, mi, ss = int(m[4]), int(m[5]), int(m[6])
    if hh > 23 or mi > 59 or ss > 59:
        return None
    frac = int((m[7] or "0")[:3].ljust(3, "0"))
    off = 0
    if m[8] and m[8] != "Z":
        oh, om = int(m[8][1:3]), int(m[8][4:6])
        if oh > 23 or om > 59:
            return None
        off = (oh * 60 + om) * 60_000 * (1 if m[8][0] == "+" else -1)
    return ms + hh * 3_600_000 + mi * 60_000 + ss * 1000 + frac - off


def iso(ms, style):
    """A date string for epoch millis `ms` in one of several accepted forms."""
    import datetime

    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    if style == 0:
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    if style == 1:
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    if style == 2:  # the same instant at +02:30
        t2 = t + datetime.timedelta(hours=2, minutes=30)
        return t2.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}" + "+02:30"
    return ms  # epoch millis as a JSON integer


def make_corpus(rng, n):
    docs = []
    for i in range(n):
        d = {
            "id": f"t{i}",
            "title": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3))),
            "body": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))),
        }
        r = rng.random()
        if r < 0.85:
            d["category"] = rng.choice(CATEGORIES)
        elif r < 0.9:
            d["category"] = None
        # else: absent
        k = rng.randint(0, 3)
        if k or rng.random() < 0.5:
            d["tags"] = rng.sample(TAGS, k)  # [] sometimes: no value
        if rng.random() < 0.9:
            # Whole seconds or millis, many ties (a few distinct days).
            ms = parse_date(f"20{rng.randint(10, 14)}-0{rng.randint(1, 3)}-1{rng.randint(0, 2)}T12:00:00Z")
            ms += rng.choice([0, 0, 1, 999, 3_600_000])
            d["date"] = iso(ms, rng.randint(0, 3))
        if rng.random() < 0.85:
            d["price"] = rng.choice([0, 1, 2.5, 9.99, 10, 30, 30.01, 99.5, 1234.5, rng.randint(0, 5000) / 100])
        elif rng.random() < 0.5:
            d["price"] = None
        if rng.random() < 0.9:
            d["popularity"] = rng.choice([0, 1, 7, 7, 100, 1_000_000, rng.randint(0, 50)])
        docs.append(d)
    return docs


def values(d, field):
    """The document's values of a typed field, as comparable Python values."""
    v = d.get(field)
    if v is None:
        return []
    if field in KEYWORDS:
        return [v] if isinstance(v, str) else list(v)
    if field == "date":
        return [v if isinstance(v, int) else parse_date(v)]
    return [v]


def words(d):
    return set(re.findall(r"\w+", (d["title"] + " " + d["body"]).lower()))


class Bad(Exception):
    pass


def bound(field, v):
    if field == "date":
        if isinstance(v, int):
            return v
        ms = parse_date(v)
        if ms is None:
            raise Bad(v)
        return ms
    return v


def matches(q, d):
    (kind, body), = q.items()
    if kind == "query_string":
        text = body["query"]
        ws = words(d)
        if text.startswith("+"):
            return all(t[1:] in ws for t in text.split())
        return any(t in ws for t in text.split())
    if kind == "match_all":
        return True
    if kind == "term":
        (f, v), = body.items()
        return bound(f, v) in values(d, f)
    if kind == "terms":
        (f, vs), = body.items()
        vs = [bound(f, v) for v in vs]
        return any(x in vs for x in values(d, f))
    if kind == "range":
        (f, b), = body.items()

        def ok(x):
            return all(
                [
                    "gte" not in b or x >= bound(f, b["gte"]),
                    "gt" not in b or x > bound(f, b["gt"]),
                    "lte" not in b or x <= bound(f, b["lte"]),
                    "lt" not in b or x < bound(f, b["lt"]),
                ]
            )

        if f in KEYWORDS:
            return any(ok_bytes(x, b) for x in values(d, f))
        return any(ok(x) for x in values(d, f))
    if kind == "exists":
        return bool(values(d, body["field"]))
    if kind == "bool":
        def clauses(k):
            c = body.get(k, [])
            return c if isinstance(c, list) else [c]

        must = clauses("must") + clauses("filter")
        should = clauses("should")
        if not all(matches(c, d) for c in must):
            return False
        if any(matches(c, d) for c in clauses("must_not")):
            return False
        if should and not must:
            return any(matches(c, d) for c in should)
        return True
    raise Bad(kind)


def ok_bytes(x, b):
    x = x.encode()
    enc = lambda k: b[k].encode()
    return all(
        [
            "gte" not in b or x >= enc("gte"),
            "gt" not in b or x > enc("gt"),
            "lte" not in b or x <= enc("lte"),
            "lt" not in b or x < enc("lt"),
        ]
    )


def sort_values(d, keys):
    """The protocol's sort values of a document (min for asc, max for desc)."""
    out = []
    for field, desc in keys:
        vs = values(d, field)
        if not vs:
            out.append(None)
        elif field in KEYWORDS:
            out.append((max if desc else min)(vs, key=lambda s: s.encode()))
        else:
            out.append((max if desc else min)(vs))
    return out


def sort_key(vals, keys):
    k = []
    for v, (field, desc) in zip(vals, keys):
        if v is None:
            k.append((1, 0))  # missing last, both directions
        else:
            x = v.encode() if isinstance(v, str) else v
            if desc:
                x = Desc(x)
            k.append((0, x))
    return k


class Desc:
    def __init__(self, x):
        self.x = x

    def __lt__(self, o):
        return self.x > o.x

    def __eq__(self, o):
        return self.x == o.x


def parse_sort(spec):
    keys = []
    for s in spec:
        if isinstance(s, str):
            keys.append((s, s == "_score"))
        else:
            (f, o), = s.items()
            o = o if isinstance(o, str) else o["order"]
            keys.append((f, o == "desc"))
    return keys


QUERIES = [
    {"query": {"match_all": {}}},
    {"query": {"term": {"category": "books"}}},
    {"query": {"term": {"category": "\u00e9t\u00e9"}}},
    {"query": {"term": {"tags": "sale"}}},
    {"query": {"terms": {"tags": ["gift", "rare"]}}},
    {"query": {"terms": {"category": []}}},
    {"query": {"term": {"popularity": 7}}},
    {"query": {"terms": {"popularity": [0, 1000000]}}},
    {"query": {"term": {"price": 30}}},
    {"query": {"term": {"price": 9.99}}},
    {"query": {"range": {"price": {"gte": 10, "lt": 99.5}}}},
    {"query": {"range": {"price": {"gt": 10}}}},
    {"query": {"range": {"price": {"lte": 2.5}}}},
    {"query": {"range": {"price": {}}}},
    {"query": {"range": {"popularity": {"gt": 0, "lte": 100}}}},
    {"query": {"range": {"date": {"gte": "2012-01-01", "lt": "2013-02-11T12:00:00.001Z"}}}},
    {"query": {"range": {"date": {"gt": "2011-03-10T14:30:00+02:30", "lte": 1400000000000}}}},
    {"query": {"term": {"date": "2012-02-11T12:00:00Z"}}},
    {"query": {"term": {"date": "2012-02-11T14:30:00.999+02:30"}}},
    {"query": {"range": {"category": {"gte": "garden", "lt": "tools"}}}},
    {"query": {"range": {"category": {"gt": "Zebra"}}}},
    {"query": {"exists": {"field": "price"}}},
    {"query": {"exists": {"field": "tags"}}},
    {"query": {"exists": {"field": "category"}}},
    {"query": {"bool": {"must": [{"query_string": {"query": "alpha"}}], "filter": [{"range": {"price": {"lt": 30}}}]}}},
    {"query": {"bool": {"must": {"query_string": {"query": "+beta +gamma"}}, "must_not": {"term": {"tags": "eco"}}}}},
    {"query": {"bool": {"should": [{"term": {"category": "toys"}}, {"term": {"tags": "big"}}]}}},
    {"query": {"bool": {"filter": [{"exists": {"field": "date"}}], "should": [{"term": {"category": "toys"}}]}}},
    {"query": {"bool": {"must_not": [{"exists": {"field": "popularity"}}]}}},
    {"query": {"bool": {}}},
    {"query": {"match_all": {}}, "sort": [{"price": {"order": "asc"}}]},
    {"query": {"match_all": {}}, "sort": [{"price": "desc"}]},
    {"query": {"match_all": {}}, "sort": [{"date": {"order": "desc"}}]},
    {"query": {"match_all": {}}, "sort": ["date"]},
    {"query": {"query_string": {"query": "delta"}}, "sort": [{"popularity": {"order": "desc"}}]},
    {"query": {"bool": {"filter": {"range": {"price": {"gte": 1}}}}}, "sort": [{"category": {"order": "asc"}}, {"popularity": {"order": "desc"}}]},
    {"query": {"match_all": {}}, "sort": [{"category": {"order": "desc"}}, {"date": "asc"}, {"price": "asc"}]},
    {"query": {"term": {"tags": "new"}}, "sort": [{"popularity": {"order": "asc"}}]},
]

BAD = [
    {"query": {"term": {"color": "red"}}},
    {"query": {"term": {"title": "alpha"}}},
    {"query": {"match_all": {}}, "sort": [{"tags": "asc"}]},
    {"query": {"range": {"date": {"gte": "2013-02-29"}}}},
    {"query": {"term": {"popularity": "seven"}}},
    {"query": {"term": {"popularity": 7.5}}},
    {"query": {"range": {"price": {"gte": 1, "gt": 2}}}},
    {"query": {"nope": {}}},
    {"sort": ["price"]},
]
BAD_LINES = ['{"query": {"match_all": {}}', '{"query": {"match_all": {}}, "query": {"match_all": {}}}']


AGG_QUERIES = [
    {"match_all": {}},
    {"query_string": {"query": "alpha"}},
    {"bool": {"filter": [{"term": {"tags": "sale"}}]}},
    {"term": {"category": "no-such-category"}},
]

AGGS = [
    {"c": {"terms": {"field": "category", "size": 3}}},
    {"c": {"terms": {"field": "category"}}},
    {"t": {"terms": {"field": "tags", "size": 4}}},
    {"m": {"date_histogram": {"field": "date", "calendar_interval": "month"}}},
    {"p": {"stats": {"field": "price"}}},
    {"n": {"stats": {"field": "popularity"}}},
    {"c": {"terms": {"field": "category", "size": 2}}, "p": {"stats": {"field": "price"}}},
]

BAD_AGGS = [
    {"a": {"avg": {"field": "price"}}},
    {"a": {"histogram": {"field": "price", "interval": 10}}},
    {"a": {"terms": {"field": "category", "order": {"_key": "asc"}}}},
    {"a": {"terms": {"field": "price"}}},
    {"a": {"date_histogram": {"field": "date", "fixed_interval": "30d"}}},
    {"a": {"date_histogram": {"field": "date", "calendar_interval": "year"}}},
    {"a": {"stats": {"field": "category"}}},
    {"a": {"terms": {"field": "category"}, "aggs": {"b": {"stats": {"field": "price"}}}}},
]


def month_start(ms):
    """Epoch millis of the first day (UTC) of the month of `ms`."""
    import datetime

    t = datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc)
    return int(datetime.datetime(t.year, t.month, 1, tzinfo=datetime.timezone.utc).timestamp()) * 1000


def next_month(ms):
    import datetime

    t = datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc)
    y, m = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    return int(datetime.datetime(y, m, 1, tzinfo=datetime.timezone.utc).timestamp()) * 1000


def expected_agg(agg, hits):
    """Elasticsearch's answer to one aggregation over the documents `hits`, by brute force."""
    (kind, p), = agg.items()
    field = p["field"]
    if kind == "terms":
        counts = {}
        for d in hits:
            for v in set(values(d, field)):
                counts[v] = counts.get(v, 0) + 1
        order = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].encode("utf-8")))
        size = p.get("size", 10)
        return {"terms": order[:size], "other": sum(c for _, c in order[size:])}
    if kind == "date_histogram":
        months = {}
        for d in hits:
            for v in values(d, field):
                k = month_start(v)
                months[k] = months.get(k, 0) + 1
        out = []
        if months:
            k = min(months)
            while k <= max(months):
                out.append((k, months.get(k, 0)))
                k = next_month(k)
        return {"months": out}
    vals = [float(v) for d in hits for v in values(d, field)]
    if not vals:
        return {"count": 0, "min": None, "max": None, "avg": None, "sum": 0.0}
    return {"count": len(vals), "min": min(vals), "max": max(vals), "avg": sum(vals) / len(vals), "sum": sum(vals)}


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def agg_difference(agg, want, got):
    """Why the answer `got` (Elasticsearch's shape) is not `want`; None when it is."""
    (kind, _), = agg.items()
    if kind == "terms":
        buckets = [(b["key"], b["doc_count"]) for b in got.get("buckets", [])]
        if [c for _, c in buckets] != [c for _, c in want["terms"]]:
            return f"terms counts {buckets} != {want['terms']}"
        # Which of the keys tied on the smallest count shown make the cut is free.
        last = buckets[-1][1] if buckets else 0
        above = lambda bs: sorted((k, c) for k, c in bs if c > last)
        if above(buckets) != above(want["terms"]):
            return f"terms {buckets} != {want['terms']}"
        if got.get("sum_other_doc_count") != want["other"]:
            return f"sum_other_doc_count {got.get('sum_other_doc_count')} != {want['other']}"
        return None
    if kind == "date_histogram":
        buckets = [(b["key"], b["doc_count"]) for b in got.get("buckets", [])]
        if buckets != want["months"]:
            return f"months {buckets[:6]}... ({len(buckets)}) != {want['months'][:6]}... ({len(want['months'])})"
        for b in got["buckets"]:
            if b.get("key_as_string") != iso(b["key"], 1):
                return f"key_as_string {b.get('key_as_string')} of {b['key']}"
        return None
    for k in ("count", "min", "max", "avg", "sum"):
        if not close(got.get(k), want[k]):
            return f"stats {k}: {got.get(k)} != {want[k]}"
    return None


def check_aggs(engine, index, docs):
    """Aggregations (terms, monthly date_histogram, stats) against a brute-force count."""
    failures = []
    lines, expected = [], []
    for q in AGG_QUERIES:
        hits = [d for d in docs if matches(q, d)]
        for aggs in AGGS:
            for mode in ("TOP_10_COUNT", "COUNT"):
                lines.append(f"{mode}\t{json.dumps({'query': q, 'aggs': aggs}, ensure_ascii=False)}")
                expected.append((aggs, len(hits), {n: expected_agg(a, hits) for n, a in aggs.items()}))
    for aggs in BAD_AGGS:
        lines.append(f"TOP_10_COUNT\t{json.dumps({'query': {'match_all': {}}, 'aggs': aggs})}")
        expected.append((aggs, None, None))
    r = subprocess.run(engine + ["query", "--index", index], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if r.returncode != 0:
        return [f"aggregations: query: {r.stderr}"]
    answers = [json.loads(l) for l in r.stdout.splitlines()]
    if len(answers) != len(lines):
        return [f"aggregations: {len(answers)} answers to {len(lines)} lines"]
    for line, (aggs, count, want), a in zip(lines, expected, answers):
        if want is None:
            if "error" not in a:
                failures.append(f"{line}: expected an error, got {a}")
            continue
        if "error" in a:
            failures.append(f"{line}: error {a['error']}")
            continue
        if a.get("count") != count:
            failures.append(f"{line}: count {a.get('count')} != {count}")
        got = a.get("aggregations")
        if not isinstance(got, dict) or set(got) != set(aggs):
            failures.append(f"{line}: aggregations {got}")
            continue
        for name, agg in aggs.items():
            why = agg_difference(agg, want[name], got[name])
            if why:
                failures.append(f"{line}: [{name}] {why}")
    print(f"typed selftest: {len(lines)} aggregation requests ({len(BAD_AGGS)} bad)")
    return failures


def main():
    args = sys.argv[1:]
    index_args = []
    while len(args) >= 2 and args[0] == "--index-arg":
        index_args.append(args[1])
        args = args[2:]
    if len(args) < 2:
        sys.exit("usage: typed_selftest.py [--index-arg ARG]... WORKDIR ENGINE [ENGINE ARGS...]")
    work, engine = args[0], args[1:]
    rng = random.Random(21)
    docs = make_corpus(rng, 240)
    docs.append({"id": "edge-empty", "title": "", "body": "", "tags": [], "category": ["books"]})
    corpus = os.path.join(work, "typed.jsonl")
    with open(corpus, "w") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    index = os.path.join(work, "typed-index")
    out = subprocess.run(
        engine + ["index", "--corpus", corpus, "--index", index, "--threads", "2", "--memory-mb", "64"] + index_args,
        capture_output=True, text=True,
    )
    if out.returncode != 0:
        sys.exit(f"FAIL: typed index: {out.stderr}")
    if json.loads(out.stdout.strip().splitlines()[-1])["docs"] != len(docs):
        sys.exit(f"FAIL: typed index docs: {out.stdout}")

    lines = []
    expected = []
    for q in QUERIES:
        hits = [d for d in docs if matches(q["query"], d)]
        keys = parse_sort(q.get("sort", []))
        for mode in ("COUNT", "TOP_10_COUNT", "TOP_1000"):
            lines.append(f"{mode}\t{json.dumps(q, ensure_ascii=False)}")
            expected.append((q, mode, hits, keys))
    for q in BAD:
        lines.append(f"TOP_10_COUNT\t{json.dumps(q)}")
        expected.append((q, "error", None, None))
    for l in BAD_LINES:
        lines.append(f"COUNT\t{l}")
        expected.append((l, "error", None, None))
    # A text query still works next to the structured ones.
    lines.append("COUNT\talpha")
    expected.append(({"query": {"query_string": {"query": "alpha"}}}, "COUNT", [d for d in docs if "alpha" in words(d)], []))

    failures = []
    by_id = {d["id"]: d for d in docs}
    stdin = "\n".join(lines) + "\n"
    answers_by_threads = {}
    for threads in ("1", "2"):
        r = subprocess.run(engine + ["query", "--index", index, "--threads", threads], input=stdin, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: query --threads {threads}: {r.stderr}")
        answers = [json.loads(l) for l in r.stdout.splitlines()]
        answers_by_threads[threads] = answers
        if len(answers) != len(lines):
            sys.exit(f"FAIL: {len(answers)} answers to {len(lines)} lines")
        for line, (q, mode, hits, keys), a in zip(lines, expected, answers):
            where = f"[threads {threads}] {line}"
            if mode == "error":
                if "error" not in a:
                    failures.append(f"{where}: expected an error, got {a}")
                continue
            if "error" in a:
                failures.append(f"{where}: error {a['error']}")
                continue
            if mode != "TOP_1000" and a["count"] != len(hits):
                failures.append(f"{where}: count {a['count']} != {len(hits)}")
            if mode == "COUNT":
                if a["hits"]:
                    failures.append(f"{where}: COUNT with hits")
                continue
            k = 10 if mode == "TOP_10_COUNT" else 1000
            got = a["hits"]
            if len(got) != min(k, len(hits)):
                failures.append(f"{where}: {len(got)} hits, want {min(k, len(hits))}")
                continue
            ids = [h["id"] for h in got]
            if not set(ids) <= {d["id"] for d in hits}:
                failures.append(f"{where}: ids not matching the query: {sorted(set(ids) - {d['id'] for d in hits})}")
            if len(set(ids)) != len(ids):
                failures.append(f"{where}: duplicate ids")
            if not keys:
                if any("sort" in h for h in got):
                    failures.append(f"{where}: sort values without a sort")
                scores = [h["score"] for h in got]
                if scores != sorted(scores, reverse=True):
                    failures.append(f"{where}: scores not descending")
                continue
            want = sorted((sort_values(d, keys) for d in hits), key=lambda v: sort_key(v, keys))[:k]
            seq = [h.get("sort") for h in got]
            if seq != want:
                failures.append(f"{where}: sort values {seq[:12]} != {want[:12]}")
            for h in got:
                if h.get("sort") != sort_values(by_id[h["id"]], keys):
                    failures.append(f"{where}: {h['id']} carries {h.get('sort')}, has {sort_values(by_id[h['id']], keys)}")
                    break
    strip = lambda a: {k: v for k, v in a.items() if k != "elapsed_us"}
    if [strip(a) for a in answers_by_threads["1"]] != [strip(a) for a in answers_by_threads["2"]]:
        failures.append("answers differ between 1 and 2 threads")

    failures.extend(check_aggs(engine, index, docs))

    # A title/body-only corpus still indexes and answers (no typed values anywhere).
    plain = os.path.join(work, "plain.jsonl")
    with open(plain, "w") as f:
        for d in docs[:20]:
            f.write(json.dumps({"id": d["id"], "title": d["title"], "body": d["body"]}) + "\n")
    r = subprocess.run(engine + ["index", "--corpus", plain, "--index", os.path.join(work, "plain-index")] + index_args, capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"title/body corpus: {r.stderr}")
    else:
        q = "COUNT\t" + json.dumps({"query": {"bool": {"must_not": {"exists": {"field": "price"}}}}})
        r = subprocess.run(engine + ["query", "--index", os.path.join(work, "plain-index")], input=q + "\n", capture_output=True, text=True)
        a = json.loads(r.stdout)
        if a.get("count") != 20:
            failures.append(f"title/body corpus: {q} -> {a}")
    # Bad typed values are bad records, naming the line.
    bad = os.path.join(work, "bad-typed.jsonl")
    with open(bad, "w") as f:
        f.write('{"id": "a", "title": "x", "price": 1}\n{"id": "b", "title": "y", "price": "cheap"}\n')
    r = subprocess.run(engine + ["index", "--corpus", bad, "--index", os.path.join(work, "bad-index")] + index_args, capture_output=True, text=True)
    if r.returncode == 0 or "bad-typed.jsonl:2" not in r.stderr:
        failures.append(f"a string price is not refused with its line: rc {r.returncode}, {r.stderr.strip()[-300:]}")

    for f in failures[:40]:
        print("FAIL:", f, file=sys.stderr)
    checks = len(lines) * 2 + 3
    print(f"typed selftest: {len(QUERIES)} queries x 3 modes x 2 thread counts, {len(BAD) + len(BAD_LINES)} bad requests; "
          f"{len(failures)} failure(s) of ~{checks} checked answers")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
