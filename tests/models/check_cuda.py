#!/usr/bin/env python3
"""One zoo export through the CUDA backend, without a GPU.

usage: check_cuda.py KILN PTXAS MODEL_DIR [ARCH]

Writes the model's kernels as one CUDA module with `kiln compile
MODEL_DIR/model.onnx --cuda-dir TMP` (symbolic dims bound to the first test
set's sizes, --cuda-arch ARCH, default sm_90): the CUDA backend's CUDA C,
compiled by NVRTC to PTX and CUBIN. Then assembles the PTX again with the
toolkit's ptxas for the same architecture. Exits 1 unless both succeed.
Running the kernels needs a GPU: scripts/gpu-check.sh.
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln_onnx  # noqa: E402


def run(cmd):
    print("$ " + kiln_onnx.quote(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace", timeout=600)
    print(p.stdout.rstrip())
    return p


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    kiln, ptxas, model_dir = sys.argv[1:4]
    arch = sys.argv[4] if len(sys.argv) > 4 else "sm_90"
    model = os.path.join(model_dir, "model.onnx")
    if not os.path.exists(model):
        print("check_cuda.py: error: missing %s (the zoo's fixture writes it)" % model)
        return 1
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        p = run([kiln, "compile", model, "--cuda-dir", tmp, "--cuda-arch", arch] +
                kiln_onnx.dim_flags(model_dir, 0))
        if p.returncode != 0 or "cuda: " not in p.stdout:
            print("check_cuda.py: FAIL: kiln compile --cuda-dir (exit %d)" % p.returncode)
            return 1
        p = run([ptxas, "-arch=" + arch, os.path.join(tmp, "kernels.ptx"), "-o",
                 os.path.join(tmp, "ptxas.cubin")])
        if p.returncode != 0:
            print("check_cuda.py: FAIL: ptxas (exit %d)" % p.returncode)
            return 1
    print("check_cuda.py: PASS in %.1fs" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
