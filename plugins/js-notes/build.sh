#!/usr/bin/env bash
# Build the JavaScript example into a component with componentize-js (from npm:
# `npm install @bytecodealliance/componentize-js`; `componentize-js` must be on PATH, with
# Node 20 or later). Writes js_notes.wasm and its manifest into the directory given (default:
# target/plugins/ of this repository).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/plugins}"
mkdir -p "$out"
command -v componentize-js >/dev/null || {
  echo "componentize-js is not on PATH: npm install @bytecodealliance/componentize-js" >&2
  exit 1
}
# componentize-js reads the app, the helper it imports (./mcpbox.js) and the WIT from one
# working directory.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/app.js" "$root/guest-sdk/js/mcpbox.js" "$work/"
cp -r "$root/wit" "$work/wit"
(cd "$work" && componentize-js app.js --wit wit --world-name mcpbox:multi-user/plugin@0.1.0 \
  -o "$out/js_notes.wasm" >&2)
# The skills beside the app go into the component: one line with mcpbox (MCPBOX names the
# binary, default `mcpbox` on PATH).
"${MCPBOX:-mcpbox}" skills "$out/js_notes.wasm" "$here/skills" >&2
cp "$here/js_notes.toml" "$out/"
echo "$out/js_notes.wasm"
