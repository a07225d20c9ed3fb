#!/usr/bin/env bash
# Copy the plugin contract, the repository's wit/, into guest-sdk/wit/: the SDK builds against
# its own copy so that it packages on its own. Run after any change under wit/;
# guest-sdk/tests/wit.rs fails until the copy is exact. wit/README.md (the contract's design
# notes) stays behind.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf wit
cp -R ../wit wit
rm wit/README.md
