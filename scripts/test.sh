#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (lit, gtest, pytest)
# through one ctest invocation. Usage: scripts/test.sh [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
