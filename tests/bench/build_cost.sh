#!/usr/bin/env bash
# What a cold `cargo build -p mcpbox` compiles, in CPU-seconds (user + system) per crate, and
# what each default feature adds: the crates only that feature brings and their cost. CPU time
# does not depend on what else the machine is doing, so this can run on a shared machine
# (slowly). Builds into a fresh target directory under $TMPDIR (about 3 GB, removed after).
# TESTING.md, "What a cold build compiles", holds the last figures.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cat > "$work/wrap" <<'WRAP'
#!/usr/bin/env bash
# RUSTC_WRAPPER: run rustc and append "crate user sys" for what it compiled.
name=-
prev=
for arg in "$@"; do
  [[ "$prev" == --crate-name ]] && name="$arg"
  prev="$arg"
done
/usr/bin/time -a -o "$UNITS" -f "$name %U %S" "$@"
WRAP
chmod +x "$work/wrap"

export UNITS="$work/units"
: > "$UNITS"
cd "$root"
/usr/bin/time -o "$work/total" -f "%U %S %e" \
  env CARGO_TARGET_DIR="$work/target" RUSTC_WRAPPER="$work/wrap" cargo build -p mcpbox --quiet
read -r user sys wall < "$work/total"
awk '{c[$1] += $2 + $3} END {for (k in c) if (k != "-" && k != "___") printf "%s %.1f\n", k, c[k]}' "$UNITS" \
  | sort -k2 -n -r > "$work/cost"
echo "cold build: $(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.0f", u + s}') CPU-s" \
  "(rustc $(awk '{s += $2} END {printf "%.0f", s}' "$work/cost")), ${wall} s wall"
echo "largest units (CPU-s):"
head -12 "$work/cost" | sed 's/^/  /'

crates() {
  cargo tree -p mcpbox -e normal,build --prefix none "$@" 2>/dev/null \
    | awk '{print $1}' | tr - _ | sort -u
}
crates --no-default-features > "$work/none"
for feature in registry otel; do
  crates --no-default-features --features "$feature" | comm -23 - "$work/none" > "$work/only"
  cost=$(awk 'NR == FNR {c[$1] = $2; next} {s += c[$1]} END {printf "%.0f", s}' "$work/cost" "$work/only")
  echo "feature $feature: $(wc -l < "$work/only") crates of its own, $cost CPU-s"
done
