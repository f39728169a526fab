#!/usr/bin/env bash
# The main job: installs what is missing, builds kiln, then runs the bundled
# example model (examples/mlp/mlp.kir, weights inside) on the reference
# interpreter with its bundled input, printing the outputs and the time, and
# checks them against NumPy's result (examples/mlp/expected_output_0.npy).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
KILN_TARGETS=kiln "$root/scripts/build.sh"
build="${KILN_BUILD_DIR:-$root/build}"
ex="$root/examples/mlp"
echo "== kiln run examples/mlp/mlp.kir (reference interpreter)"
"$build/tools/kiln" run "$ex/mlp.kir" --input x="$ex/x.npy" \
  --expect 0="$ex/expected_output_0.npy" --rtol 1e-4 --atol 1e-6
