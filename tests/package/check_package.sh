#!/usr/bin/env bash
# check_package.sh BUILD_DIR SOURCE_DIR: installs BUILD_DIR into a temporary
# prefix (cmake --install), builds examples/embed against it with
# find_package(kiln) and nothing else (no Kiln include paths, flags or
# libraries given by hand), and runs it on the demo model: load, compile,
# save an artifact, load it, run 8 threads on one executable; then imports
# the installed Python module with Debian's python3 and runs the same model.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
test -f "$tmp/prefix/lib/cmake/kiln/kilnConfig.cmake"
readelf -d "$tmp/prefix/lib/libkiln.so" | grep -q 'SONAME.*libkiln.so.0.1'
cmake -S "$src/tests/package" -B "$tmp/app" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DEMBED_SOURCE="$src/examples/embed/embed.cpp" \
  -DCMAKE_CXX_FLAGS="-Wall -Wextra" > "$tmp/configure.log"
cmake --build "$tmp/app" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
# Kiln's headers compile without warnings under the application's -Wall -Wextra.
if grep -q "warning:" "$tmp/build.log"; then cat "$tmp/build.log"; exit 1; fi
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/app/embed" "$src/examples/mlp/mlp.kir" "$tmp/mlp.kiln"
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
echo "check_package: installed, built against find_package(kiln), ran; python3 imported kiln from the prefix"
