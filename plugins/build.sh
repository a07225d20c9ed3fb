#!/usr/bin/env bash
# Build every example plugin for wasm32-wasip2 and collect the components in target/plugins/.
# The conformance suite's fixture plugin, as a WASI 0.2 and a WASI 0.3 component, goes to
# target/conformance-plugins/. With --with-test-plugins, also build the test fixtures
# (tests/plugins/) into target/test-plugins/; with --with-bench-plugin, the benchmark's plugin
# into target/bench-plugins/. Installs the wasm32-wasip2 target if it is missing. Prints the
# examples' directory. Used by the quick start, the tests and the benchmark.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

examples=(echo-tools code-review quotes weather interactive todo sequential-thinking mcp-time memory filesystem fetch github)
# Built with the examples, kept apart: the fixtures of the official conformance suite, as a
# WASI 0.2 and as a WASI 0.3 component.
conformance=(conformance conformance-p3)
fixtures=()
bench=()
for arg in "$@"; do
  case "$arg" in
    --with-test-plugins) fixtures=(hostile host-probe tools-only slow-list kv-probe kv-draft caller-probe p3-probe) ;;
    --with-bench-plugin) bench=(bench-tools fanout fanout-p2) ;;
    *) echo "unknown option: $arg (expected --with-test-plugins or --with-bench-plugin)" >&2; exit 2 ;;
  esac
done

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  echo "installing the wasm32-wasip2 target" >&2
  rustup target add wasm32-wasip2 >&2
fi

args=()
for p in "${examples[@]}" "${conformance[@]}" "${fixtures[@]}" "${bench[@]}"; do args+=(-p "$p"); done
# A separate target directory keeps this build from waiting on (or invalidating) the host's.
cargo build --quiet --manifest-path "$root/Cargo.toml" --profile plugin --target wasm32-wasip2 \
  --target-dir "$root/target/wasm" "${args[@]}" >&2

# The component of package P is P.wasm (dashes as underscores), unless its [lib] names it.
declare -A component=([mcp-time]=time)
collect() {
  local out="$1"; shift
  mkdir -p "$out"
  for p in "$@"; do
    local name="${component[$p]:-${p//-/_}}"
    # Copied beside (a name of its own: builds may run at once) and renamed into place: a
    # server watching the directory, or a reader, never sees a half-written component.
    local part
    part="$(mktemp "$out/.$name.wasm.XXXXXX")"
    cp "$root/target/wasm/wasm32-wasip2/plugin/$name.wasm" "$part"
    chmod 644 "$part"
    mv -f "$part" "$out/$name.wasm"
  done
}
collect "$root/target/plugins" "${examples[@]}"
collect "$root/target/conformance-plugins" "${conformance[@]}"
# Manifests (grants) go beside their plugins. The filesystem server gets its sample directory
# by absolute path, so the manifest works wherever the plugin directory is used from.
cp "$root/plugins/echo-tools/echo_tools.toml" "$root/plugins/weather/weather.toml" "$root/plugins/todo/todo.toml" \
  "$root/plugins/sequential-thinking/sequential_thinking.toml" "$root/plugins/time/time.toml" "$root/plugins/memory/memory.toml" "$root/plugins/fetch/fetch.toml" "$root/plugins/github/github.toml" \
  "$root/target/plugins/"
rm -f "$root/target/plugins/files.wasm" "$root/target/plugins/files.toml"
cat > "$root/target/plugins/filesystem.toml" <<TOML
# Written by plugins/build.sh: grant the filesystem server its sample directory, read-only, at
# the same path as on the host. See plugins/filesystem/filesystem.toml for your own.
title = "Filesystem"
instances = "per-caller"
[limits]
memory-mib = 256
result-kib = 32768
[[dirs]]
host = "$root/plugins/filesystem/sample-data"
mode = "read-only"
TOML
if [ ${#fixtures[@]} -gt 0 ]; then collect "$root/target/test-plugins" "${fixtures[@]}"; fi
if [ ${#bench[@]} -gt 0 ]; then collect "$root/target/bench-plugins" "${bench[@]}"; fi
echo "$root/target/plugins"
