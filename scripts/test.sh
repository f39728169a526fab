#!/usr/bin/env bash
# Installs what is missing (Debian packages, the venv build/venv of PyTorch
# 2.x and onnx 1.23 from PyPI: scripts/venv.sh), configures, builds (warnings
# are errors) and runs every test with ctest: the GoogleTest units, the lit
# suite, the ONNX conformance suites and the model zoos.
#   scripts/test.sh                      Release build in build/
#   KILN_SANITIZE=address,undefined scripts/test.sh   ASan+UBSan build in build-san/
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/venv.sh" >/dev/null
extra=(-DKILN_WERROR=ON)
if [ -n "${KILN_SANITIZE:-}" ]; then
  export KILN_BUILD_DIR="${KILN_BUILD_DIR:-$root/build-san}"
  extra+=("-DKILN_SANITIZE=${KILN_SANITIZE//,/;}" -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
fi
build="${KILN_BUILD_DIR:-$root/build}"
"$root/scripts/build.sh" "${extra[@]}"
cd "$build"
ctest --output-on-failure -j"${KILN_JOBS:-2}" "$@"
