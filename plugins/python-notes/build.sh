#!/usr/bin/env bash
# Build the Python example into a component with componentize-py (from PyPI:
# `pip install componentize-py`; it must be on PATH). Writes python_notes.wasm and its manifest
# into the directory given (default: target/plugins/ of this repository).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/plugins}"
mkdir -p "$out"
command -v componentize-py >/dev/null || {
  echo "componentize-py is not on PATH: pip install componentize-py" >&2
  exit 1
}
# -p: where the app and the helper module (mcpbox_sdk.py) are found.
componentize-py -d "$root/wit" -w mcpbox:multi-user/plugin@0.1.0 componentize \
  -p "$here" -p "$root/guest-sdk/python" app -o "$out/python_notes.wasm" >&2
# The skills beside the app go into the component: one line with mcpbox (MCPBOX names the
# binary, default `mcpbox` on PATH).
"${MCPBOX:-mcpbox}" skills "$out/python_notes.wasm" "$here/skills" >&2
cp "$here/python_notes.toml" "$out/"
echo "$out/python_notes.wasm"
