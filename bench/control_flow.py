#!/usr/bin/env python3
"""Control flow measured: what a compiled loop costs per iteration, unrolled
and not, and the scripted zoo models against ONNX Runtime.

usage: build/venv/bin/python bench/control_flow.py [--build build] [--threads 1]
                                                   [--runs 200] [--out bench/CONTROL_FLOW.md]

1. Per-iteration cost of a compiled `loop` whose body is two small pointwise ops
   (y = (x + w) * w over f32[W], carried), written as .kir files into
   BUILD/bench-control-flow:
     body      the body once, as a plain graph: what its two ops cost compiled
     loop-N    the loop with a constant trip count N: N = 64 is unrolled by
               inline-regions (one straight graph, fused), N = 65 and 1000 are
               not (the loop is one step running the body, compiled as a
               model of its own, once per iteration: Note [Compiled regions])
   `kiln bench --json --no-cache` per file at --threads; per iteration =
   median / N, overhead = per iteration - body.
1b. A loop of 100 trips over f32[4096] whose body computes tanh(exp(w * 0.001))
   from a captured w: the default pipeline against the same less
   hoist-loop-invariants (`--passes=`).
2. The scripted models of the zoo (build/tests/models/zoo, scripts/make_models.py:
   scripted_decoder, scripted_while, scripted_branch, scripted_nested,
   scripted_append, opset 17) on test_data_set_0: `kiln bench --data` against one ONNX Runtime
   session (ORT_ENABLE_ALL, intra_op threads = --threads), medians of --runs.
Writes a markdown report (machine, method, tables, what it means).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIDTH = 256

BODY = """graph @body(%x: f32[{w}], %w: f32[{w}]) -> (f32[{w}]) {{
  %s = add(%x, %w) : f32[{w}]
  %y = mul(%s, %w) : f32[{w}]
  return %y
}}
"""

LOOP = """graph @loop(%x: f32[{w}], %w: f32[{w}]) -> (f32[{w}]) {{
  %n = constant dense<{n}> : i64[]
  %t = constant dense<true> : bool[]
  %r = loop(%n, %t, %x, %w) {{body = graph @body(%i: i64[], %c: bool[], %a: f32[{w}], %k: f32[{w}]) -> (bool[], f32[{w}]) {{
      %s = add(%a, %k) : f32[{w}]
      %y = mul(%s, %k) : f32[{w}]
      return %c, %y
    }}, num_carried = 1}} : f32[{w}]
  return %r
}}
"""


# A body whose exp and tanh read only a captured value: hoist-loop-invariants
# moves them before the loop.
INVARIANT = """graph @invariant(%x: f32[{w}], %w: f32[{w}]) -> (f32[{w}]) {{
  %n = constant dense<{n}> : i64[]
  %t = constant dense<true> : bool[]
  %r = loop(%n, %t, %x, %w) {{body = graph @body(%i: i64[], %c: bool[], %a: f32[{w}], %v: f32[{w}]) -> (bool[], f32[{w}]) {{
      %k = constant dense<0.001> : f32[]
      %m = mul(%v, %k) : f32[{w}]
      %e = exp(%m) : f32[{w}]
      %l = tanh(%e) : f32[{w}]
      %s = add(%a, %l) : f32[{w}]
      return %c, %s
    }}, num_carried = 1}} : f32[{w}]
  return %r
}}
"""


def pipeline_without(kiln, name):
    """The standard pipeline (`kiln compile --help` prints it) less pass `name`."""
    out = subprocess.run([kiln, "compile", "--help"], capture_output=True, text=True)
    marker = "(the standard pipeline: "
    text = out.stdout + out.stderr
    passes = text[text.index(marker) + len(marker):].split(")")[0]
    return ",".join(p for p in passes.split(",") if p != name)


def kiln_bench(kiln, path, threads, runs, extra=()):
    cmd = [kiln, "bench", path, "--json", "--no-cache", "--threads", str(threads),
           "--runs", str(runs)] + list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), out.stderr.strip()[-400:]))
    return json.loads(out.stdout.strip().splitlines()[-1])


def ort_bench(model_dir, threads, runs):
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), opts,
                                providers=["CPUExecutionProvider"])
    session_s = time.perf_counter() - t0
    data = os.path.join(model_dir, "test_data_set_0")
    feeds = {}
    for i, inp in enumerate(sess.get_inputs()):
        t = onnx.load_tensor(os.path.join(data, "input_%d.pb" % i))
        feeds[inp.name] = numpy_helper.to_array(t)
    for _ in range(5):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), session_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "CONTROL_FLOW.md"))
    args = ap.parse_args()
    kiln = os.path.join(args.build, "tools", "kiln")
    work = os.path.join(args.build, "bench-control-flow")
    os.makedirs(work, exist_ok=True)

    lines = ["# Control flow: compiled loops and scripted models", "",
             "Generated by `bench/control_flow.py` (its docstring gives the method). Machine: %s, "
             "%d logical CPUs, %s; threads %d, %d timed runs, medians." % (
                 platform.processor() or platform.machine(), os.cpu_count(), platform.platform(),
                 args.threads, args.runs), ""]

    body = os.path.join(work, "body.kir")
    with open(body, "w") as f:
        f.write(BODY.format(w=WIDTH))
    b = kiln_bench(kiln, body, args.threads, args.runs)
    lines += ["## 1. A loop of two small pointwise ops, one fused kernel (f32[%d], y = (x + w) * w "
              "carried)" % WIDTH, "",
              "| graph | steps | kernels | fallbacks | median | per iteration | over the body |",
              "| --- | --- | --- | --- | --- | --- | --- |",
              "| body once | %d | %d | %d | %.2f us | %.2f us | - |" % (
                  b["steps"], b["kernels"], b["fallbacks"], b["median_s"] * 1e6,
                  b["median_s"] * 1e6)]
    for n in (64, 65, 1000):
        path = os.path.join(work, "loop-%d.kir" % n)
        with open(path, "w") as f:
            f.write(LOOP.format(w=WIDTH, n=n))
        r = kiln_bench(kiln, path, args.threads, max(10, args.runs // (10 if n > 100 else 1)))
        per = r["median_s"] / n
        lines.append("| loop, %d trips%s | %d | %d | %d | %.2f us | %.3f us | %+.3f us |" % (
            n, " (unrolled)" if n <= 64 else "", r["steps"], r["kernels"], r["fallbacks"],
            r["median_s"] * 1e6, per * 1e6, (per - b["median_s"]) * 1e6))
    lines += ["", "Unrolled (64 trips), the copies fuse into one kernel and an iteration "
              "costs less than the body run alone (one step's overhead shared by all). A loop "
              "that is not unrolled runs its compiled body once per iteration through "
              "Executable::run (input checks, a pooled context, an output block), the same "
              "call that times 'body once': an iteration costs one run of the compiled body, "
              "and 'over the body' is what the loop adds to it (target: at most 1 us over "
              "the kernels).", ""]

    wide, trips = 4096, 100
    path = os.path.join(work, "invariant.kir")
    with open(path, "w") as f:
        f.write(INVARIANT.format(w=wide, n=trips))
    hoisted = kiln_bench(kiln, path, args.threads, args.runs)
    kept = kiln_bench(kiln, path, args.threads, args.runs,
                      ["--passes=" + pipeline_without(kiln, "hoist-loop-invariants")])
    lines += ["## 1b. Loop-invariant code (f32[%d], %d trips: s += tanh(exp(w * 0.001)))" % (
                  wide, trips), "",
              "| pipeline | median | per iteration |", "| --- | --- | --- |"]
    for label, r in (("default (hoist-loop-invariants)", hoisted),
                     ("default less hoist-loop-invariants", kept)):
        lines.append("| %s | %.2f us | %.3f us |" % (label, r["median_s"] * 1e6,
                                                     r["median_s"] * 1e6 / trips))
    lines += ["", "Hoisted, the mul, exp and tanh run once before the loop and the body is one add; "
              "kept, they run in every iteration (%.1fx the time)." % (
                  kept["median_s"] / hoisted["median_s"]), ""]

    zoo = os.path.join(args.build, "tests", "models", "zoo")
    lines += ["## 2. Scripted models against ONNX Runtime (test_data_set_0, opset 17)", "",
              "| model | Kiln median | ORT median | Kiln / ORT | Kiln compile | ORT session |",
              "| --- | --- | --- | --- | --- | --- |"]
    for name in ("scripted_decoder", "scripted_while", "scripted_branch", "scripted_nested",
                 "scripted_append"):
        d = os.path.join(zoo, name + "-op17")
        if not os.path.isdir(d):
            lines.append("| %s | not generated (run `ctest -R models-generate`) | | | | |" % name)
            continue
        k = kiln_bench(kiln, os.path.join(d, "model.onnx"), args.threads, args.runs,
                       ["--data", os.path.join(d, "test_data_set_0")])
        o, session = ort_bench(d, args.threads, args.runs)
        lines.append("| %s | %.1f us | %.1f us | %.2f | %.1f ms | %.1f ms |" % (
            name, k["median_s"] * 1e6, o * 1e6, k["median_s"] / o, k["compile_s"] * 1e3,
            session * 1e3))
    lines.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
