# Sourced by build.sh and run.sh: sets TIERDEX_JAVA (path of the `java` binary) and
# TIERDEX_JAVA_MAJOR to the newest JDK with a major version >= 21 (Lucene 10 needs 21+).
# Scans /usr/lib/jvm/*/bin/java first (TIERDEX_JVM_ROOT overrides /usr/lib/jvm); falls back
# to $JAVA_HOME, then to `java` on PATH.

tierdex_java_major() {
  # `java -version` prints e.g. `openjdk version "25.0.3" 2026-04-21` or `"1.8.0_402"`.
  local v
  v=$("$1" -version 2>&1 | awk -F'"' '/version "/ { print $2; exit }') || return 1
  [ -n "$v" ] || return 1
  case "$v" in
    1.*) v=${v#1.} ;;
  esac
  v=${v%%[!0-9]*}
  [ -n "$v" ] || return 1
  echo "$v"
}

tierdex_find_java() {
  local min=21 best="" best_major=0 j real major seen=" "
  for j in "${TIERDEX_JVM_ROOT:-/usr/lib/jvm}"/*/bin/java; do
    [ -x "$j" ] || continue
    real=$(readlink -f "$j") || continue
    case "$seen" in *" $real "*) continue ;; esac
    seen="$seen$real "
    major=$(tierdex_java_major "$real") || continue
    if [ "$major" -gt "$best_major" ]; then
      best=$real
      best_major=$major
    fi
  done
  if [ "$best_major" -lt "$min" ]; then
    best="" best_major=0
    for j in "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java 2>/dev/null)"; do
      [ -n "$j" ] && [ -x "$j" ] || continue
      major=$(tierdex_java_major "$j") || continue
      if [ "$major" -ge "$min" ]; then
        best=$j
        best_major=$major
        break
      fi
    done
  fi
  if [ -z "$best" ]; then
    echo "error: no JDK >= $min found (looked in /usr/lib/jvm/*/bin/java, \$JAVA_HOME and PATH); Lucene 10 needs Java $min or newer" >&2
    return 1
  fi
  TIERDEX_JAVA=$best
  TIERDEX_JAVA_MAJOR=$best_major
}
