"""torch.compile with backend="kiln" against Inductor and eager, side by side.

    PYTHONPATH=build/python build/venv/bin/python bench/torch_compile.py [--threads 1]
        [--runs 30] [--models resnet18,mobilenet_v2,transformer]

Each model is built with fixed seeds, run under torch.inference_mode() at
batch 1 (the transformer: 1 x 64 tokens of width 128), warmed up (the
first call compiles; its time is the compile column), then timed: median
of --runs calls. Kiln's outputs are checked against eager's (max abs
error); a model with a graph the backend ran eagerly says so. One process, one engine after another, torch.set_num_threads(T)
for all of them (Kiln's runs get threads=T too). Prints a Markdown table.
"""

import argparse
import contextlib
import io
import os
import platform
import statistics
import sys
import time

import torch


class Block(torch.nn.Module):
    """A pre-norm transformer block written out (nn.TransformerEncoderLayer
    takes a fused inference path, aten::_transformer_encoder_layer_fwd,
    that the ONNX exporter cannot export)."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.up, self.down = torch.nn.Linear(width, 2 * width), torch.nn.Linear(2 * width, width)

    def forward(self, x):
        b, n, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, w // self.heads).unbind(2)
        a = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + self.out(a.transpose(1, 2).reshape(b, n, w))
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))


def models(names):
    import torchvision
    out = {}
    torch.manual_seed(0)
    if "resnet18" in names:
        out["resnet18"] = (torchvision.models.resnet18(), torch.randn(1, 3, 224, 224))
    if "mobilenet_v2" in names:
        out["mobilenet_v2"] = (torchvision.models.mobilenet_v2(), torch.randn(1, 3, 224, 224))
    if "transformer" in names:
        out["transformer"] = (torch.nn.Sequential(Block(128, 4), Block(128, 4)),
                              torch.randn(1, 64, 128))
    return {k: (m.eval(), x) for k, (m, x) in out.items()}


def timed(fn, x, runs):
    start = time.perf_counter()
    first = fn(x)
    compile_s = time.perf_counter() - start
    fn(x)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return first, compile_s, statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--models", default="resnet18,mobilenet_v2,transformer")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import kiln

    def kiln_backend(gm, example_inputs):  # the registered backend, at T threads
        return kiln.torch_backend(gm, example_inputs, threads=args.threads)

    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"{args.threads} thread(s); median of {args.runs} runs; torch {torch.__version__}.\n")
    print("| model | eager ms | Inductor ms | Kiln ms | Kiln / Inductor | Kiln / eager | "
          "Inductor compile s | Kiln compile s | Kiln max abs error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, (model, x) in models(args.models.split(",")).items():
        with torch.inference_mode():
            want, _, eager_ms = timed(model, x, args.runs)
            torch._dynamo.reset()
            _, ind_s, ind_ms = timed(torch.compile(model), x, args.runs)
            torch._dynamo.reset()
            log = io.StringIO()
            with contextlib.redirect_stderr(log):
                got, kiln_s, kiln_ms = timed(torch.compile(model, backend=kiln_backend), x,
                                             args.runs)
            err = (got - want).abs().max().item()
        eager_graphs = log.getvalue().count("graph runs eagerly")
        note = f" ({eager_graphs} graph(s) ran eagerly)" if eager_graphs else ""
        print(f"| {name}{note} | {eager_ms:.2f} | {ind_ms:.2f} | {kiln_ms:.2f} | "
              f"{kiln_ms / ind_ms:.2f} | {kiln_ms / eager_ms:.2f} | {ind_s:.1f} | {kiln_s:.1f} | "
              f"{err:.1e} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
