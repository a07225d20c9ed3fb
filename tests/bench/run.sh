#!/usr/bin/env bash
# The benchmark, in one command: build mcpbox, the native rmcp baseline and the harness in
# release mode, build the plugins, then measure both servers with the same client and print
# the report (also written to target/bench/report.md). Extra arguments go to mcpbench (for
# example --quick). See BENCHMARKS.md for what it measures and how to read it.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

"$root/plugins/build.sh" --with-bench-plugin >/dev/null
echo "building mcpbox, native-echo and mcpbench (release)" >&2
cargo build --quiet --release -p mcpbox -p mcpbox-bench

mkdir -p target/bench
exec target/release/mcpbench \
  --mcpbox target/release/mcpbox \
  --native target/release/native-echo \
  --plugin target/bench-plugins/bench_tools.wasm \
  --alt-plugin target/plugins/echo_tools.wasm \
  --work target/bench/work \
  --out target/bench/report.md \
  "$@"
