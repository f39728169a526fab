#!/usr/bin/env bash
# Creates or checks the Python virtual environment build/venv with the pinned
# PyPI wheels that Debian 12 does not package: PyTorch 2.x and torchvision
# (the dynamo exporter's model zoo, the benchmark peers), onnxscript (the
# dynamo exporter's translator), ONNX Runtime and OpenVINO (benchmark peers),
# onnx 1.23 (the newest backend node tests) and Ray Serve (examples/serve).
# Prints the venv's python.
#
#   scripts/venv.sh              # build/venv under the source tree
#   KILN_VENV=DIR scripts/venv.sh
#
# The first run downloads several GB (PyTorch brings its CUDA wheels) and
# takes minutes; later runs only check the versions. Nothing outside the
# venv is installed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${KILN_VENV:-$root/build/venv}"

# Pinned: the versions the dynamo zoo, the conformance expectations and the
# benchmark harness were written and checked against.
pins=(torch==2.15.0 torchvision==0.29.2 onnxruntime==1.32.0 openvino==2026.4.1 onnx==1.23.2 numpy==2.4.6
      onnxscript==0.7.2 'ray[serve]==2.60.0')

if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" - "${pins[@]}" <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    name = name.split("[")[0]  # ray[serve]: the extra is not part of the name
    try:
        have = version(name)
    except PackageNotFoundError:
        sys.exit(1)
    if have.split("+")[0] != want:
        sys.exit(1)
PY
then
  echo "venv: installing ${pins[*]} into $venv (PyPI; several GB the first time)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2
fi
echo "$venv/bin/python"
