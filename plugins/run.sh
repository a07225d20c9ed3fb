#!/usr/bin/env bash
# Quick start: build the example plugins and mcpbox, then serve the examples over stdio.
# Extra arguments go to `mcpbox serve` (try --log debug).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

plugins_dir="$(bash "$root/plugins/build.sh")"
cargo build --quiet --manifest-path "$root/Cargo.toml" -p mcpbox >&2
bin="$root/target/debug/mcpbox"

cat >&2 <<INFO

mcpbox is built, with the example plugins in $plugins_dir.
To use it from an MCP client, configure the command below (Ctrl-C or Ctrl-D stops this one):

  command: $bin
  args:    ["serve", "--plugins", "$plugins_dir"]

Now serving MCP on this terminal's stdin/stdout; paste JSON-RPC lines to talk to it:
  {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}
  {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}

INFO
exec "$bin" serve --plugins "$plugins_dir" "$@"
