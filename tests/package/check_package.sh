#!/usr/bin/env bash
# check_package.sh BUILD_DIR SOURCE_DIR: installs BUILD_DIR into a temporary
# prefix (cmake --install), builds examples/embed against it with
# find_package(kiln) and nothing else (no Kiln include paths, flags or
# libraries given by hand), and runs it on the demo model: load, compile,
# save an artifact, load it, run 8 threads on one executable. Builds
# examples/deploy against kiln::runtime alone and runs that artifact in a
# clean folder holding only the artifact and libkiln_runtime.so (which needs
# no LLVM and no ONNX). Then imports the installed Python module with
# Debian's python3 and runs the same model.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
test -f "$tmp/prefix/lib/cmake/kiln/kilnConfig.cmake"
readelf -d "$tmp/prefix/lib/libkiln.so" | grep -q 'SONAME.*libkiln.so.0.1'
readelf -d "$tmp/prefix/lib/libkiln_runtime.so" | grep -q 'SONAME.*libkiln_runtime.so.0.1'
if readelf -d "$tmp/prefix/lib/libkiln_runtime.so" | grep -E 'NEEDED.*(libLLVM|libonnx|libkiln\.so)'; then
  echo "check_package: libkiln_runtime.so needs the compiler's libraries"; exit 1
fi
# The GPU's libraries (kiln/Cuda.h) are opened when a model is loaded, never
# linked: both libraries start on a machine without them.
for lib in libkiln.so libkiln_runtime.so; do
  if readelf -d "$tmp/prefix/lib/$lib" | grep -E 'NEEDED.*(libcuda|libcudnn|libcublas|libnvrtc)'; then
    echo "check_package: $lib links a CUDA library"; exit 1
  fi
done
cmake -S "$src/tests/package" -B "$tmp/app" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DEMBED_SOURCE="$src/examples/embed/embed.cpp" \
  -DDEPLOY_SOURCE="$src/examples/deploy/deploy.cpp" \
  -DCMAKE_CXX_FLAGS="-Wall -Wextra" > "$tmp/configure.log"
cmake --build "$tmp/app" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
# Kiln's headers compile without warnings under the application's -Wall -Wextra.
if grep -q "warning:" "$tmp/build.log"; then cat "$tmp/build.log"; exit 1; fi
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/app/embed" "$src/examples/mlp/mlp.kir" "$tmp/mlp.kiln"
# The deployed program: its folder has the artifact and the runtime library,
# nothing else of Kiln's.
if readelf -d "$tmp/app/deploy" | grep -E 'NEEDED.*(libLLVM|libonnx|libkiln\.so)'; then
  echo "check_package: the kiln::runtime application needs the compiler's libraries"; exit 1
fi
mkdir "$tmp/clean"
cp "$tmp/app/deploy" "$tmp/mlp.kiln" "$tmp"/prefix/lib/libkiln_runtime.so.* "$tmp/clean/"
(cd "$tmp/clean" && LD_LIBRARY_PATH=. ./deploy mlp.kiln)
# The Python module installed under the prefix: Debian's python3 imports it
# from lib/python3.X/dist-packages (its RPATH finds the prefix's libkiln.so).
pydir=$(echo "$tmp"/prefix/lib/python3.*/dist-packages)
PYTHONPATH="$pydir" /usr/bin/python3 -c "
import sys, numpy as np, kiln
assert kiln.__file__.startswith('$tmp'), kiln.__file__
exe = kiln.compile('$src/examples/mlp/mlp.kir', threads=1)
y = exe(np.load('$src/examples/mlp/x.npy'))
np.testing.assert_allclose(y, np.load('$src/examples/mlp/expected_output_0.npy'), rtol=1e-4, atol=1e-6)
"
echo "check_package: installed, built kiln::kiln and kiln::runtime applications against find_package(kiln), ran them; python3 imported kiln from the prefix"
