#!/usr/bin/env bash
# Build every example plugin for wasm32-wasip2 and collect the components in target/plugins/.
# Installs the wasm32-wasip2 target if it is missing. Used by the quick start and the tests.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/target/plugins"

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  echo "installing the wasm32-wasip2 target" >&2
  rustup target add wasm32-wasip2 >&2
fi

plugins=(echo-tools code-review quotes)
args=()
for p in "${plugins[@]}"; do args+=(-p "$p"); done
# A separate target directory keeps this build from waiting on (or invalidating) the host's.
cargo build --quiet --manifest-path "$root/Cargo.toml" --profile plugin --target wasm32-wasip2 \
  --target-dir "$root/target/wasm" "${args[@]}" >&2

mkdir -p "$out"
for p in "${plugins[@]}"; do
  cp "$root/target/wasm/wasm32-wasip2/plugin/${p//-/_}.wasm" "$out/"
done
echo "$out"
