#!/usr/bin/env bash
# check_package.sh BUILD_DIR SOURCE_DIR: installs BUILD_DIR into a temporary
# prefix (cmake --install), builds examples/embed against it with
# find_package(kiln) and nothing else (no Kiln include paths, flags or
# libraries given by hand), and runs it on the demo model: load, compile,
# save an artifact, load it, run 8 threads on one executable.
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
echo "check_package: installed, built against find_package(kiln), ran"
