#!/usr/bin/env bash
# Builds the tantivy peer engine (release) and prints the binary's path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
# Its own target directory, whatever the environment says.
export CARGO_TARGET_DIR="$here/target"
cargo build --release 1>&2
echo "$here/target/release/tierdex-tantivy-engine"
