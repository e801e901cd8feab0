#!/bin/bash
# Runs a command and prints its peak resident memory, split into anonymous
# memory and mapped file pages (sampled from /proc/PID/status every 0.5 s),
# as `peak total=... anon=... file=... MiB` on stdout after the command's
# own output. Each new high is logged on stderr with the seconds since the
# start. /usr/bin/time's maximum RSS is the same total without the split.
#
#   bench/scripts/peak-rss.sh target/release/tierdex index CORPUS -o DIR
set -u
"$@" &
pid=$!
peak_anon=0
peak_file=0
peak=0
while kill -0 "$pid" 2>/dev/null; do
  read -r anon file < <(awk '/^RssAnon/{a=$2} /^RssFile/{f=$2} END{print a+0, f+0}' "/proc/$pid/status" 2>/dev/null || echo "0 0")
  total=$((anon + file))
  if [ "$total" -gt "$peak" ]; then
    peak=$total; peak_anon=$anon; peak_file=$file
    echo "t=${SECONDS}s total=$((total / 1024)) anon=$((anon / 1024)) file=$((file / 1024)) MiB" >&2
  fi
  sleep 0.5
done
wait "$pid"
rc=$?
echo "peak total=$((peak / 1024)) anon=$((peak_anon / 1024)) file=$((peak_file / 1024)) MiB"
exit $rc
