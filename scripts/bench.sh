#!/usr/bin/env bash
# Benchmarks Kiln's compiled models against PyTorch eager, torch.compile
# (Inductor, CPU) and ONNX Runtime on every model scripts/make_models.py
# exports, at 1 and 2 threads, and writes bench/RESULTS.md and
# bench/results.png (raw data: build/bench/results.json). See bench/README.md.
#
#   scripts/bench.sh                                  # everything (about 20 minutes)
#   scripts/bench.sh --models mlp,small_cnn --threads 1 --runs 30   # a quick look
#
# Arguments pass through to bench/harness/driver.py (--models, --threads,
# --runs, --min-runs, --rounds, --warmup, --engines, --budget-min, ...).
# KILN_BENCH_NO_BUILD=1 skips install-deps and the build (binaries already
# built, e.g. while another build is using build/).
# The first run installs: Debian packages (scripts/install-deps.sh), a venv
# build/bench-venv with pinned PyPI wheels of PyTorch and ONNX Runtime, and
# the model zoo (build/tests/models/zoo, cached).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="$root/build"

# Pinned: the versions this harness was written and checked against.
pins=(torch==2.15.0 torchvision==0.29.2 onnxruntime==1.32.0 onnx==1.23.2 numpy==2.4.6)

if [ "${KILN_BENCH_NO_BUILD:-0}" != 1 ]; then
  scripts/install-deps.sh
  KILN_TARGETS="kiln kiln_pointwise_bench kiln_ceilings kiln_step_overhead" scripts/build.sh
fi

OMP_NUM_THREADS=1 /usr/bin/python3 scripts/make_models.py "$build/tests/models/zoo"

venv="$build/bench-venv"
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv"
fi
if ! "$venv/bin/python" - "${pins[@]}" <<'EOF'
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        sys.exit(1)
    if have.split("+")[0] != want:
        sys.exit(1)
EOF
then
  echo "bench: installing ${pins[*]} into $venv (PyPI; PyTorch brings its CUDA wheels, several GB)"
  "$venv/bin/pip" install --quiet "${pins[@]}"
fi

# Inductor's compiled kernels are cached across runs (the first run compiles
# cold; RESULTS.md says which state each torch.compile found).
export TORCHINDUCTOR_CACHE_DIR="$build/bench/inductor-cache"
mkdir -p "$build/bench"
"$venv/bin/python" bench/harness/driver.py "$@"
/usr/bin/python3 bench/harness/report.py "$build/bench/results.json"
