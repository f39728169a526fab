"""A torchvision model compiled by Kiln three ways, each checked against
eager PyTorch and timed (docs/PYTHON.md):

1. an ONNX file (torch.onnx.export, dynamic batch, then kiln.compile),
2. kiln.from_torch (torch.export under torch 2.x, torch.fx under 1.13; no
   ONNX), with a dynamic batch dim,
3. torch.compile(module, backend="kiln") (torch 2.x).

    python three_ways.py [--model resnet18] [--size 224] [--threads 1] [--runs 20]

Exits 1 when an output differs from eager beyond rtol/atol 1e-4.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision

import kiln


def median_ms(fn, x, runs):
    fn(x)  # the first call compiles (torch.compile) or warms up
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18", help="a torchvision.models constructor")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=20)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    module = getattr(torchvision.models, a.model)().eval()
    x = torch.randn(1, 3, a.size, a.size)
    with torch.no_grad():
        want = module(x)
    ways = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, a.model + ".onnx")
        # torch 2.x's default exporter (dynamo), dynamic batch; torch 1.13's
        # TorchScript exporter with the same dynamic axis.
        if hasattr(torch, "export"):
            torch.onnx.export(module, (x,), path, input_names=["x"],
                              dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
        else:
            torch.onnx.export(module, (x,), path, input_names=["x"],
                              dynamic_axes={"x": {0: "batch"}}, opset_version=17)
        ways["onnx file"] = kiln.compile(path, threads=a.threads)
    model = kiln.from_torch(module, x, dynamic_shapes=({0: "batch"},))
    ways["from_torch"] = kiln.compile(model, threads=a.threads)
    if hasattr(torch, "compile"):
        compiled = torch.compile(module, backend="kiln")
        ways["torch.compile"] = lambda t: compiled(t)
    wrong = 0
    print(f"{a.model} 1x3x{a.size}x{a.size}, {a.threads} thread(s), median of {a.runs} runs")
    with torch.no_grad():
        eager = median_ms(module, x, a.runs)
        print(f"  {'eager PyTorch':14s} {eager:8.2f} ms")
        for name, fn in ways.items():
            got = torch.as_tensor(np.asarray(fn(x)))
            err = (got - want).abs().max().item()
            ok = torch.allclose(got, want, rtol=1e-4, atol=1e-4)
            wrong += not ok
            ms = median_ms(fn, x, a.runs)
            print(f"  {name:14s} {ms:8.2f} ms  {eager / ms:5.2f}x eager  max error {err:.2e}"
                  + ("" if ok else "  WRONG"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
