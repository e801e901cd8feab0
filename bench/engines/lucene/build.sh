#!/usr/bin/env bash
# Builds the Lucene peer engine into target/tierdex-lucene-engine.jar (one runnable jar),
# with Maven on the newest installed JDK (>= 21). Works from any directory.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/jdk.sh"
tierdex_find_java
JAVA_HOME=$(dirname "$(dirname "$TIERDEX_JAVA")")
export JAVA_HOME
if ! command -v mvn >/dev/null 2>&1; then
  echo "error: Maven (mvn) not found on PATH" >&2
  exit 1
fi
if [ "$TIERDEX_JAVA_MAJOR" -ge 24 ]; then
  # Maven 3.8's bundled Guava/Guice touch sun.misc.Unsafe: keep the JDK 24+ warnings quiet.
  export MAVEN_OPTS="--sun-misc-unsafe-memory-access=allow ${MAVEN_OPTS:-}"
fi
echo "building Lucene engine with JDK $TIERDEX_JAVA_MAJOR ($JAVA_HOME)" >&2
# Debian's Maven 3.8 prints stray ANSI reset codes even in batch mode: filter them out.
mvn -B -q -Dstyle.color=never -f "$here/pom.xml" package 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' >&2
jar="$here/target/tierdex-lucene-engine.jar"
if [ ! -f "$jar" ]; then
  echo "error: build finished but $jar is missing" >&2
  exit 1
fi
echo "built $jar" >&2
