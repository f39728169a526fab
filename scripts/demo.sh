#!/usr/bin/env bash
# The main job: installs what is missing, builds kiln, then runs the bundled
# example model (examples/mlp/mlp.kir, weights inside) with its bundled input,
# first on the reference interpreter, then compiled for this CPU (LLVM JIT
# kernels + oneDNN), printing outputs, compile time and latency, and checking
# both against NumPy's result (examples/mlp/expected_output_0.npy).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
KILN_TARGETS=kiln "$root/scripts/build.sh"
build="${KILN_BUILD_DIR:-$root/build}"
ex="$root/examples/mlp"
run=("$build/tools/kiln" run "$ex/mlp.kir" --input x="$ex/x.npy"
     --expect 0="$ex/expected_output_0.npy" --rtol 1e-4 --atol 1e-6 --repeat 50)
echo "== kiln run examples/mlp/mlp.kir (reference interpreter)"
"${run[@]}"
echo
echo "== kiln run examples/mlp/mlp.kir --compile (LLVM JIT + oneDNN, 1 thread)"
"${run[@]}" --compile --threads 1
