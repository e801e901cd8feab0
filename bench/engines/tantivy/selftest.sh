#!/usr/bin/env bash
# Self-test of the tantivy peer engine: builds it, indexes a 3-document
# corpus, runs the five query modes (one and two threads) and checks the
# output against bench/PROTOCOL.md; then the typed fields and structured
# queries against a brute-force oracle (../typed_selftest.py). Needs only
# cargo and python3. Exits non-zero on failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
engine="$("$here/build.sh")"
work="$(mktemp -d "${TMPDIR:-/tmp}/tantivy-selftest.XXXXXX")"
trap 'rm -rf "$work"' EXIT

cat > "$work/corpus.jsonl" <<'EOF'
{"id": "d1", "title": "The Quick Brown Fox", "body": "The quick brown fox jumps over the lazy dog."}
{"id": "d2", "title": "Lazy Dogs", "body": "Dogs sleep all day; the dog is lazy, the FOX is not."}
{"id": "d3", "title": "Nothing here", "body": "Completely unrelated text about résumés and naïve café owners."}
EOF

"$engine" version > "$work/version.txt"
"$engine" index --corpus "$work/corpus.jsonl" --index "$work/idx" --threads 2 --memory-mb 64 \
    > "$work/index.json" 2> "$work/index.log"

printf '%s\n' \
    $'TOP_10\tfox dog' \
    $'TOP_100\tlazy' \
    $'TOP_1000\t"quick brown"' \
    $'TOP_10_COUNT\t+the +dog' \
    $'COUNT\tbody:the -title:lazy' \
    $'COUNT\tcafé' \
    $'TOP_10\t(fox OR nothing) AND title:the' \
    $'TOP_10\tunclosed (' \
    $'COUNT\tzzzznotaword' \
    > "$work/queries.tsv"
"$engine" query --index "$work/idx" < "$work/queries.tsv" > "$work/answers1.jsonl"
"$engine" query --index "$work/idx" --threads 2 < "$work/queries.tsv" > "$work/answers2.jsonl"

# Robustness: these must fail with a message.
if "$engine" query --index "$work/missing" < /dev/null 2> "$work/err1.txt"; then
    echo "FAIL: query on a missing index succeeded" >&2; exit 1
fi
if "$engine" index --corpus "$work/corpus.jsonl" --index "$work/idx" > /dev/null 2> "$work/err2.txt"; then
    echo "FAIL: indexing into a non-empty directory succeeded" >&2; exit 1
fi
printf '{"id":"a","title":"t","body":"b"}\n{"id":\n' > "$work/bad.jsonl"
if "$engine" index --corpus "$work/bad.jsonl" --index "$work/bad" > /dev/null 2> "$work/err3.txt"; then
    echo "FAIL: indexing a bad corpus succeeded" >&2; exit 1
fi
: > "$work/empty.jsonl"
if "$engine" index --corpus "$work/empty.jsonl" --index "$work/empty" > /dev/null 2> "$work/err4.txt"; then
    echo "FAIL: indexing an empty corpus succeeded" >&2; exit 1
fi

python3 - "$work" <<'EOF'
import json, re, sys, os

work = sys.argv[1]
failures = []

def check(cond, what):
    if not cond:
        failures.append(what)

version = open(os.path.join(work, "version.txt")).read()
check(re.fullmatch(r"tantivy \d+\.\d+\.\d+\n", version) is not None, f"version line {version!r}")

lines = open(os.path.join(work, "index.json")).read().splitlines()
check(len(lines) == 1, f"index printed {len(lines)} lines")
stats = json.loads(lines[0])
check(set(stats) == {"docs", "index_secs", "merge_secs"}, f"index keys {sorted(stats)}")
check(stats["docs"] == 3, f"docs {stats['docs']}")
check(all(isinstance(stats[k], float) and stats[k] >= 0 for k in ("index_secs", "merge_secs")), f"times {stats}")

err3 = open(os.path.join(work, "err3.txt")).read()
check("bad.jsonl:2" in err3, f"bad corpus message without line number: {err3!r}")
for name in ("err1.txt", "err2.txt", "err4.txt"):
    check(open(os.path.join(work, name)).read().strip() != "", f"{name}: no error message")

queries = [l.split("\t", 1) for l in open(os.path.join(work, "queries.tsv")).read().splitlines()]
# (mode, expected ids in any order or None, expected count or None, error expected)
expected = [
    ("TOP_10", {"d1", "d2"}, None, False),
    ("TOP_100", {"d1", "d2"}, None, False),
    ("TOP_1000", {"d1"}, None, False),
    ("TOP_10_COUNT", {"d1", "d2"}, 2, False),
    ("COUNT", set(), 1, False),
    ("COUNT", set(), 1, False),
    ("TOP_10", {"d1"}, None, False),
    ("TOP_10", None, None, True),
    ("COUNT", set(), 0, False),
]
assert len(expected) == len(queries)

def check_answers(path):
    answers = [json.loads(l) for l in open(path).read().splitlines()]
    check(len(answers) == len(queries), f"{path}: {len(answers)} answers for {len(queries)} queries")
    for (mode, query), (emode, ids, count, error), a in zip(queries, expected, answers):
        where = f"{os.path.basename(path)} {mode} {query!r}"
        check(isinstance(a.get("elapsed_us"), int) and a["elapsed_us"] >= 0, f"{where}: elapsed_us {a}")
        if error:
            check(set(a) == {"error", "elapsed_us"} and isinstance(a["error"], str) and a["elapsed_us"] == 0,
                  f"{where}: expected an error, got {a}")
            continue
        check(set(a) == {"count", "hits", "elapsed_us"}, f"{where}: keys {sorted(a)}")
        if mode in ("TOP_10", "TOP_100", "TOP_1000"):
            check(a["count"] is None, f"{where}: count must be null")
        else:
            check(a["count"] == count, f"{where}: count {a['count']} != {count}")
        if mode == "COUNT":
            check(a["hits"] == [], f"{where}: hits must be empty")
        hits = a["hits"]
        check(all(set(h) == {"id", "score"} and isinstance(h["id"], str)
                  and isinstance(h["score"], (int, float)) for h in hits), f"{where}: hit shape {hits}")
        scores = [h["score"] for h in hits]
        check(scores == sorted(scores, reverse=True), f"{where}: scores not descending {scores}")
        check({h["id"] for h in hits} == ids, f"{where}: ids {[h['id'] for h in hits]} != {sorted(ids)}")
    return answers

a1 = check_answers(os.path.join(work, "answers1.jsonl"))
a2 = check_answers(os.path.join(work, "answers2.jsonl"))
strip = lambda a: {k: v for k, v in a.items() if k != "elapsed_us"}
check([strip(a) for a in a1] == [strip(a) for a in a2], "answers differ between 1 and 2 threads")

if failures:
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    sys.exit(1)
print(f"selftest: {len(queries)} queries x 2 thread counts, index and error cases: all good")
EOF

python3 "$here/../typed_selftest.py" "$work" "$engine"
