#!/bin/bash
# Phrase Bloom filter benchmark (issue #5, DESIGN §4): the same queries on an
# index with filters (`tierdex`) and one without (`tierdex@nobloom`), under a
# 256 MiB memory limit (cold: the page cache dropped, no warm-up, one
# workload category per run, so each category's bytes are its own) and in
# memory (ram tier, all categories in one run).
#
#   bench/scripts/phrase-filters.sh NAME CORPUS BLOOM_INDEX NOBLOOM_INDEX [--no-commands]
#
# Results: bench/results/NAME-phrase-filters-256/<category>/ and
# bench/results/NAME-phrase-filters-ram/, summarised by
# bench/scripts/phrase-filters-table.py.
set -euo pipefail
name=$1 corpus=$2 bloom=$3 nobloom=$4
commands=${5:-}
cd "$(dirname "$0")/../.."
cargo build --release -q -p tierdex-cli -p tierdex-bench
B=target/release/tierdex-bench
cats=(pair-10 pair-100 pair-1k pair-10k pair-100k phrase-2 phrase-3)
common=(--corpus "$corpus" --index "tierdex=$bloom" --index "tierdex@nobloom=$nobloom")
for c in "${cats[@]}"; do
  $B limited "${common[@]}" \
    --engines tierdex:mmap-adaptive,tierdex@nobloom:mmap-adaptive,tierdex:direct,tierdex@nobloom:direct \
    --sweep 256 --categories "$c" --no-commands --generated 60 --warmup-queries 0 \
    --out "bench/results/$name-phrase-filters-256/$c"
done
if [ "$commands" != "--no-commands" ]; then
  $B limited "${common[@]}" \
    --engines tierdex:mmap-adaptive,tierdex@nobloom:mmap-adaptive,tierdex:direct,tierdex@nobloom:direct \
    --sweep 256 --generated 0 --command-categories phrase --warmup-queries 0 \
    --out "bench/results/$name-phrase-filters-256/commands-phrase"
fi
all=$(IFS=,; echo "${cats[*]}")
if [ "$commands" = "--no-commands" ]; then source=(--no-commands); else source=(--command-categories phrase); fi
$B limited "${common[@]}" --engines tierdex:ram,tierdex@nobloom:ram \
  --sweep 0 --categories "$all" --generated 60 "${source[@]}" \
  --out "bench/results/$name-phrase-filters-ram"
