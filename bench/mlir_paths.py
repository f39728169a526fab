#!/usr/bin/env python3
"""mlir_paths.py [--models a,b] [--runs N] [--out bench/MLIR.md]: Kiln's
compiled path and the MLIR CPU path (Note [The MLIR CPU path] in
codegen/mlir/MlirRun.cpp) side by side on zoo models, one thread, each
engine in its own `kiln run` process on the export's test inputs:

  kiln run MODEL --data SET --check --compile --threads 1 --repeat N
  kiln run MODEL --data SET --check --codegen=mlir --repeat N

Reports each path's median run time (after a first run reported apart),
the ratio MLIR / Kiln, and whether both outputs passed --check against
PyTorch's. Needs the zoo (scripts/make_models.py build/tests/models/zoo).
"""
import argparse
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILN = os.path.join(ROOT, "build", "tools", "kiln")
ZOO = os.path.join(ROOT, "build", "tests", "models", "zoo")
DEFAULT = ("mlp,small_cnn,pointwise,text_classifier,transformer_encoder,vit_tiny,seq2seq,"
           "squeezenet1_1,mobilenet_v2,resnet18,efficientnet_b0")


def run(model, extra, runs):
    d = os.path.join(ZOO, model + "-op17")
    cmd = [KILN, "run", os.path.join(d, "model.onnx"), "--data", os.path.join(d, "test_data_set_0"),
           "--check", "--repeat", str(runs)] + extra
    env = dict(os.environ, KILN_CACHE="off", OMP_NUM_THREADS="1")
    start = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    wall = time.time() - start
    m = re.search(r"^time: ([0-9.]+) ms", p.stdout, re.M)
    ok = p.returncode == 0 and "FAIL" not in p.stdout
    return (float(m.group(1)) if m else None), ok, wall, " ".join(cmd[1:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "MLIR.md"))
    a = ap.parse_args()
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    rows = []
    for model in a.models.split(","):
        kt, kok, kwall, kcmd = run(model, ["--compile", "--threads", "1"], a.runs)
        mt, mok, mwall, mcmd = run(model, ["--codegen=mlir"], a.runs)
        ratio = "%.1f" % (mt / kt) if kt and mt else "-"
        rows.append((model, kt, mt, ratio, kok, mok, kwall, mwall))
        print(model, kt, mt, ratio, kok, mok, file=sys.stderr)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    with open(a.out, "w") as f:
        f.write("# Kiln's compiled path and the MLIR CPU path\n\n")
        f.write("Written by `bench/mlir_paths.py --runs %d` on %s (%s, %d CPUs, %s), "
                "Kiln %s.\n\n" % (a.runs, time.strftime("%Y-%m-%d"), cpu, os.cpu_count(),
                                   platform.machine(), commit))
        f.write("One thread; each path in its own `kiln run` process on the export's test inputs, "
                "the median of %d runs after a first run (not counted); both checked against "
                "PyTorch's outputs (`--check`). Commands: `kiln run MODEL --data SET --check "
                "--compile --threads 1 --repeat %d` and `kiln run MODEL --data SET --check "
                "--codegen=mlir --repeat %d`. Wall: the whole process (import, compile, runs).\n\n"
                % (a.runs, a.runs, a.runs))
        f.write("| model | Kiln ms | MLIR path ms | MLIR / Kiln | Kiln check | MLIR check | "
                "Kiln wall s | MLIR wall s |\n|---|---|---|---|---|---|---|---|\n")
        for model, kt, mt, ratio, kok, mok, kwall, mwall in rows:
            f.write("| %s | %s | %s | %s | %s | %s | %.1f | %.1f |\n" % (
                model, "%.3g" % kt if kt else "-", "%.3g" % mt if mt else "-", ratio,
                "ok" if kok else "FAIL", "ok" if mok else "FAIL", kwall, mwall))
        f.write("\nWhy the MLIR path is slower: it is MLIR's generic lowering of the exported "
                "graph, one loop nest per op (linalg to loops, no tiling, no vectorization "
                "beyond what LLVM's loop vectorizer finds), every intermediate tensor "
                "allocated, and no libraries (products and convolutions as plain loops), where "
                "Kiln fuses, vectorizes and calls oneDNN. It is there to cross-check Kiln's "
                "numerics, not to be fast.\n")


if __name__ == "__main__":
    main()
