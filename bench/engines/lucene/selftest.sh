#!/usr/bin/env bash
# Self-check of the Lucene peer engine: builds it, indexes a 3-document corpus, runs the five
# query modes (and a bad query) and checks the output shape and a few values with python3; then
# the typed fields and structured queries against a brute-force oracle (../typed_selftest.py).
# Then the same for `index --bp` (the lucene-bp engine: documents reordered by recursive graph
# bisection): the 3-document index answers as the plain one, and the typed oracle passes on an
# index that BP really reordered (its minimum document frequency lowered to 1 for these small
# corpora, a test-only setting). Exits non-zero on any failure. Works from any directory.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tierdex-lucene-selftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$here/build.sh"

version=$("$here/run.sh" version 2>/dev/null)
echo "version: $version"
case "$version" in
  "lucene "*" (JDK "*")") ;;
  *) echo "FAIL: unexpected version line: $version" >&2; exit 1 ;;
esac

cat > "$tmp/corpus.jsonl" <<'JSON'
{"id": "d1", "title": "The quick brown fox", "body": "The fox jumps over the lazy dog. Quick quick!"}
{"id": "d2", "title": "Lazy dogs", "body": "Dogs sleep all day; the dog is lazy. Über-Café \"quoted\""}
{"id": "d3", "title": "Unrelated", "body": "Nothing to see here: numbers 42 and 7, fox-free text."}
JSON

"$here/run.sh" index --corpus "$tmp/corpus.jsonl" --index "$tmp/index" --threads 2 --memory-mb 16 \
  > "$tmp/index.out" 2> "$tmp/index.err" || { cat "$tmp/index.err" >&2; echo "FAIL: index" >&2; exit 1; }

# The command lines both indexes (plain and --bp) answer.
commands() {
  printf '%s\n' \
    $'TOP_10\tfox' \
    $'TOP_100\tlazy dog' \
    $'TOP_1000\t"lazy dog"' \
    $'TOP_10_COUNT\t+the +fox' \
    $'COUNT\tbody:dog -title:lazy' \
    $'COUNT\tüber café' \
    $'TOP_10\t(unbalanced'
}

commands \
  | "$here/run.sh" query --index "$tmp/index" > "$tmp/query.out" 2> "$tmp/query.err" \
  || { cat "$tmp/query.err" >&2; echo "FAIL: query" >&2; exit 1; }

for t in 2; do
  printf '%s\n' $'TOP_10\tfox' $'COUNT\tdog' $'TOP_10_COUNT\tthe' \
    | "$here/run.sh" query --index "$tmp/index" --threads "$t" > "$tmp/query$t.out" 2>> "$tmp/query.err" \
    || { cat "$tmp/query.err" >&2; echo "FAIL: query --threads $t" >&2; exit 1; }
done

python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
failures = []
checks = 0
def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)

lines = open(f"{tmp}/index.out").read().splitlines()
check(len(lines) == 1, f"index: one stdout line, got {lines!r}")
idx = json.loads(lines[0])
check(set(idx) == {"docs", "index_secs", "merge_secs"}, f"index keys {sorted(idx)}")
check(idx["docs"] == 3, f"index docs {idx['docs']}")
check(all(isinstance(idx[k], (int, float)) and idx[k] >= 0 for k in ("index_secs", "merge_secs")),
      "index times are non-negative numbers")

out = [json.loads(l) for l in open(f"{tmp}/query.out")]
check(len(out) == 7, f"7 answers, got {len(out)}")

def shape(r, counted, maxhits):
    check(set(r) == {"count", "hits", "elapsed_us"}, f"keys {sorted(r)}")
    check(isinstance(r["elapsed_us"], int) and r["elapsed_us"] >= 0, f"elapsed_us {r['elapsed_us']!r}")
    if counted:
        check(isinstance(r["count"], int) and r["count"] >= 0, f"count {r['count']!r}")
    else:
        check(r["count"] is None, f"count must be null: {r['count']!r}")
    check(isinstance(r["hits"], list) and len(r["hits"]) <= maxhits, f"hits {r['hits']!r}")
    scores = []
    for h in r["hits"]:
        check(set(h) == {"id", "score"} and isinstance(h["id"], str)
              and isinstance(h["score"], float), f"hit {h!r}")
        scores.append(h["score"])
    check(scores == sorted(scores, reverse=True), f"scores descending {scores}")

ids = lambda r: sorted(h["id"] for h in r["hits"])
top10, top100, top1000, top10c, count, umlaut, bad = out
shape(top10, False, 10);   check(ids(top10) == ["d1", "d3"], f"TOP_10 fox {ids(top10)}")
check(top10["hits"][0]["id"] == "d1", "d1 ranks first for fox")
shape(top100, False, 100); check(ids(top100) == ["d1", "d2"], f"TOP_100 lazy dog {ids(top100)}")
shape(top1000, False, 1000); check(ids(top1000) == ["d1"], f"TOP_1000 phrase {ids(top1000)}")
shape(top10c, True, 10);   check(top10c["count"] == 1 and ids(top10c) == ["d1"], f"TOP_10_COUNT {top10c}")
shape(count, True, 0);     check(count["count"] == 1 and count["hits"] == [], f"COUNT {count}")
shape(umlaut, True, 0);    check(umlaut["count"] == 1, f"COUNT über café {umlaut}")
check(set(bad) == {"error", "elapsed_us"} and bad["elapsed_us"] == 0 and isinstance(bad["error"], str),
      f"parse error answer {bad}")

par = [json.loads(l) for l in open(f"{tmp}/query2.out")]
check(len(par) == 3, f"--threads 2: 3 answers, got {len(par)}")
if len(par) == 3:
    check(ids(par[0]) == ["d1", "d3"] and par[1]["count"] == 2 and par[2]["count"] == 2,
          f"--threads 2 answers in input order {par}")

for f in failures:
    print("FAIL:", f, file=sys.stderr)
print(f"selftest: {checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
PY

python3 "$here/../typed_selftest.py" "$tmp" "$here/run.sh"

# lucene-bp: index --bp.
"$here/run.sh" index --corpus "$tmp/corpus.jsonl" --index "$tmp/bp-index" --threads 2 --memory-mb 16 --bp \
  > "$tmp/bp-index.out" 2> "$tmp/bp-index.err" || { cat "$tmp/bp-index.err" >&2; echo "FAIL: index --bp" >&2; exit 1; }
grep -q "BP reordering done" "$tmp/bp-index.err" || { cat "$tmp/bp-index.err" >&2; echo "FAIL: index --bp did not reorder" >&2; exit 1; }
commands \
  | "$here/run.sh" query --index "$tmp/bp-index" > "$tmp/bp-query.out" 2> "$tmp/bp-query.err" \
  || { cat "$tmp/bp-query.err" >&2; echo "FAIL: query (bp index)" >&2; exit 1; }
if "$here/run.sh" index --corpus "$tmp/corpus.jsonl" --index "$tmp/bp-bad" --bp=yes 2> "$tmp/bp-bad.err"; then
  echo "FAIL: index --bp=yes accepted" >&2; exit 1
fi
grep -q "option --bp takes no value" "$tmp/bp-bad.err" || { cat "$tmp/bp-bad.err" >&2; echo "FAIL: --bp=yes message" >&2; exit 1; }
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
idx = json.loads(open(f"{tmp}/bp-index.out").read().splitlines()[-1])
failures = []
if set(idx) != {"docs", "index_secs", "merge_secs"} or idx["docs"] != 3:
    failures.append(f"index --bp printed {idx}")
plain = [json.loads(l) for l in open(f"{tmp}/query.out")]
bp = [json.loads(l) for l in open(f"{tmp}/bp-query.out")]
# Same answers up to the order of tied hits (ties go by doc id, which BP changes).
norm = lambda r: {k: (sorted((h["id"], h["score"]) for h in v) if k == "hits" else v)
                  for k, v in r.items() if k != "elapsed_us"}
if len(plain) != len(bp):
    failures.append(f"{len(bp)} answers from the bp index, {len(plain)} from the plain one")
for i, (p, b) in enumerate(zip(plain, bp)):
    if norm(p) != norm(b):
        failures.append(f"answer {i + 1}: plain {p} != bp {b}")
for f in failures:
    print("FAIL:", f, file=sys.stderr)
print(f"bp selftest: {len(bp)} answers equal to the plain index's, {len(failures)} failed")
sys.exit(1 if failures else 0)
PY

mkdir "$tmp/bp"
TIERDEX_BENCH_JAVA_OPTS="${TIERDEX_BENCH_JAVA_OPTS:-} -Dtierdex.bp.minDocFreq=1" \
  python3 "$here/../typed_selftest.py" --index-arg --bp "$tmp/bp" "$here/run.sh"
