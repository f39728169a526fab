#!/usr/bin/env bash
# Configures and builds Kiln into $KILN_BUILD_DIR (default: build/).
# Extra CMake arguments pass through: scripts/build.sh -DKILN_SANITIZE="address;undefined"
# Targets to build come from $KILN_TARGETS (default: all).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KILN_BUILD_DIR:-$root/build}"
jobs="${KILN_JOBS:-2}"
export CCACHE_BASEDIR="$root"
# Debug-info builds (the sanitizer build is RelWithDebInfo) would otherwise
# hash the build folder into every object, so a fresh clone in another place
# (CI) could not reuse the cache.
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${KILN_BUILD_TYPE:-Release}" "$@" >/dev/null
# shellcheck disable=SC2086
ninja -C "$build" -j"$jobs" ${KILN_TARGETS:-}
