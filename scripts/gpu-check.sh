#!/usr/bin/env bash
# The GPU check of the CUDA backend, in two halves (docs/DESIGN.md, "The
# CUDA backend"; bench/RESULTS-gpu.md is what it writes).
#
#   scripts/gpu-check.sh bundle [DIR]   here, without a GPU (the dry run):
#       builds kiln and kiln-cuda-runner (with the CUDA toolkit), then the
#       bundle (scripts/gpu_bundle.py, default build/gpu-bundle): the runner
#       and the libraries it needs, the models exported and compiled into
#       CUDA artifacts for sm_90, their weights for PyTorch, every
#       elementwise op with the interpreter's outputs, a manifest; fails if
#       it is over 64 MiB, what a device call carries.
#   scripts/gpu-check.sh device [DIR]   on the GPU machine (python3 with
#       PyTorch 2.x, the NVIDIA driver; no build there): scripts/gpu_check.py
#       checks every model's outputs against PyTorch eager's and every op's
#       against the interpreter's, times Kiln against eager and
#       torch.compile, and the bandwidth kernels against the copy ceiling,
#       within 450 s of budget (killed at 480 s), writing
#       RESULTS-gpu.md and results.json into $OUT (else build/gpu-check).
#
# With the device tool of a session that has a GPU: run `scripts/gpu-check.sh
# bundle` here, then on the device `scripts/gpu-check.sh device` carrying
# build/gpu-bundle, and commit $OUT/RESULTS-gpu.md as bench/RESULTS-gpu.md.
# KILN_GPU_CHECK_NO_BUILD=1 skips the build (binaries already built).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-}"
case "$mode" in
  bundle)
    dir="${2:-$root/build/gpu-bundle}"
    if [ "${KILN_GPU_CHECK_NO_BUILD:-0}" != 1 ]; then
      scripts/install-deps.sh
      KILN_TARGETS="kiln kiln-cuda-runner" scripts/build.sh
    fi
    if [ ! -x build/tools/kiln-cuda-runner ]; then
      echo "gpu-check.sh: error: build/tools/kiln-cuda-runner was not built: CMake found no" \
           "CUDA toolkit (NVRTC) under KILN_CUDA_ROOT, /usr/local/cuda by default" >&2
      exit 1
    fi
    OMP_NUM_THREADS=1 /usr/bin/python3 scripts/gpu_bundle.py --kiln build/tools/kiln \
      --runner build/tools/kiln-cuda-runner --out "$dir"
    echo "gpu-check.sh: on the GPU machine, with $dir carried: scripts/gpu-check.sh device $dir"
    ;;
  device)
    dir="${2:-$root/build/gpu-bundle}"
    out="${OUT:-$root/build/gpu-check}"
    exec timeout 480 python3 scripts/gpu_check.py --bundle "$dir" --out "$out" --budget-s 450
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
