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
# The first run installs: Debian packages (scripts/install-deps.sh), the venv
# build/venv with pinned PyPI wheels of PyTorch and ONNX Runtime
# (scripts/venv.sh), and
# the model zoo (build/tests/models/zoo, cached).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="$root/build"

if [ "${KILN_BENCH_NO_BUILD:-0}" != 1 ]; then
  scripts/install-deps.sh
  KILN_TARGETS="kiln kiln_pointwise_bench kiln_ceilings kiln_step_overhead" scripts/build.sh
fi

OMP_NUM_THREADS=1 /usr/bin/python3 scripts/make_models.py "$build/tests/models/zoo"

python="$(scripts/venv.sh)"

# Inductor's compiled kernels are cached across runs (the first run compiles
# cold; RESULTS.md says which state each torch.compile found).
export TORCHINDUCTOR_CACHE_DIR="$build/bench/inductor-cache"
mkdir -p "$build/bench"
"$python" bench/harness/driver.py "$@"
/usr/bin/python3 bench/harness/report.py "$build/bench/results.json"
