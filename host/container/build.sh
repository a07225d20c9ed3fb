#!/usr/bin/env bash
# Build the mcpbox container image with buildah (or podman): a `dist` build of the binary
# (or the one MCPBOX_BINARY names), staged with the shared libraries it links into
# target/container/rootfs/, then host/container/Containerfile. Prints the image name.
# Usage: host/container/build.sh [IMAGE]   (default: localhost/mcpbox:latest)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
image="${1:-localhost/mcpbox:latest}"
cd "$root"
binary="${MCPBOX_BINARY:-}"
if [ -z "$binary" ]; then
  cargo build --quiet --profile dist -p mcpbox >&2
  binary="$root/target/dist/mcpbox"
fi
stage="$root/target/container/rootfs"
rm -rf "$stage"
mkdir -p "$stage"
cp "$binary" "$stage/mcpbox"
# The dynamic loader and every library the binary links, at the same paths.
for lib in $(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
  mkdir -p "$stage$(dirname "$lib")"
  cp -L "$lib" "$stage$lib"
done
if command -v buildah >/dev/null; then
  # shellcheck disable=SC2086
  buildah ${BUILDAH_FLAGS:-} bud --isolation "${BUILDAH_ISOLATION:-chroot}" \
    -f host/container/Containerfile -t "$image" . >&2
elif command -v podman >/dev/null; then
  podman build -f host/container/Containerfile -t "$image" . >&2
else
  echo "neither buildah nor podman is installed (apt-get install buildah, or podman)" >&2
  exit 1
fi
echo "$image"
