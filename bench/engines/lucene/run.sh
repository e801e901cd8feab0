#!/usr/bin/env bash
# Runs the Lucene peer engine: run.sh version | index ... | query ... (see bench/PROTOCOL.md).
# Uses the same JDK as build.sh (newest installed, >= 21). Works from any directory.
#
# JVM flags:
#   -Xms = -Xmx = $TIERDEX_BENCH_HEAP_MB (default 2048) MB: fixed heap, no resizing while timed.
#   -XX:+UseParallelGC: throughput collector. Queries and indexing allocate mostly short-lived
#     garbage; Parallel GC has cheaper write barriers than G1 (faster mutator code) and its
#     young collections of a 2 GB heap are short. Override with TIERDEX_BENCH_JAVA_OPTS.
#   --add-modules jdk.incubator.vector: lets Lucene use its SIMD (Panama vector) code paths.
#   --enable-native-access=ALL-UNNAMED: lets MMapDirectory call madvise() without warnings.
#   TIERDEX_BENCH_JAVA_OPTS: extra JVM options appended last (e.g. -XX:+UseG1GC).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
jar="$here/target/tierdex-lucene-engine.jar"
if [ ! -f "$jar" ]; then
  echo "error: $jar not found: run $here/build.sh first" >&2
  exit 1
fi
. "$here/jdk.sh"
tierdex_find_java
heap=${TIERDEX_BENCH_HEAP_MB:-2048}
case "$heap" in
  '' | *[!0-9]*)
    echo "error: TIERDEX_BENCH_HEAP_MB must be a number of megabytes, got '$heap'" >&2
    exit 1
    ;;
esac
# shellcheck disable=SC2086 # TIERDEX_BENCH_JAVA_OPTS is a list of options
exec "$TIERDEX_JAVA" \
  -Xms"${heap}m" -Xmx"${heap}m" \
  -XX:+UseParallelGC \
  --add-modules jdk.incubator.vector \
  --enable-native-access=ALL-UNNAMED \
  ${TIERDEX_BENCH_JAVA_OPTS:-} \
  -jar "$jar" "$@"
