#!/usr/bin/env bash
# Installs the Debian 12 packages Kiln needs to build, test and demo.
# Idempotent: asks apt-get only for packages that are not installed yet,
# so a second run does nothing and needs no network.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  clang-format
  llvm-16-dev llvm-16-tools libzstd-dev
  libmlir-16-dev mlir-16-tools
  libgtest-dev libgmock-dev
  protobuf-compiler libprotobuf-dev libonnx-dev
  libdnnl-dev
  python3 python3-dev python3-numpy pybind11-dev
  python3-torch python3-torchvision python3-onnx
  python3-matplotlib
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
