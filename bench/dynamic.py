#!/usr/bin/env python3
"""Dynamic shapes measured: one model exported with symbolic dims, run at several
sizes by Kiln and by ONNX Runtime, side by side.

usage: build/venv/bin/python bench/dynamic.py [--build build] [--threads 1]
                                              [--runs 10] [--out bench/DYNAMIC.md]

Three models, exported once by torch.onnx's dynamo exporter (torch 2.x of the
venv) with symbolic dims into BUILD/bench-dynamic (cached):
  resnet18   torchvision, batch symbolic; run at batch 1, 8 and 64 (3x224x224)
  efficientnet_b0  torchvision, batch symbolic; run at batch 1, 8 and 32: its
             SiLU and squeeze-excite kernels run on channels-last buffers
  causal_lm  scripts/make_models.py's CausalLM (GPT-style, 2 layers, dim 64,
             positions up to 512), batch and sequence symbolic; run at batch 1
             and sequence 16, 128 and 512
For each size, in fresh processes, at --threads:
  kiln       `kiln bench MODEL --dim ... --no-cache --json`: a static compile
             for that size, the median latency and the peak RSS
  symbolic   `kiln bench MODEL --dim SYM=N --dim SYM=LO..HI --no-cache --json`
             (resnet18, efficientnet_b0: batch 1..64; causal_lm: batch 1..8,
             seq 1..512): the
             kernels with run-time sizes compiled once for the ranges from the
             unbound model, then the compile for that size running them; its
             median latency
  api        one process: kiln.compile(MODEL) with the dims left symbolic
             (the embedding API: its kernels with run-time sizes compiled
             once, then a specialization per size that runs them, Note
             [Compiling per size] in api/Kiln.cpp), run at every size: the
             one-time kernel compile (its log line) and each size's first
             run (its specialization's compile included)
  artifact   `kiln compile MODEL --dim SYM=LO..HI -o` once (a symbolic artifact,
             Note [Symbolic artifacts] in codegen/SymbolicArtifact.cpp), then
             per size `kiln bench ARTIFACT --dim SYM=N --no-cache --json`: its
             load plus that size's compile from the kernels it holds, and its
             median latency
  ort        one InferenceSession (ORT_ENABLE_ALL) created once, then run at
             every size: its session time once, the median latency per size
             and the process's peak RSS after all sizes
Writes a markdown table with the latency ratios (kiln / ort) and the compile
times: Kiln's per size and summed against ORT's one session.
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

# What the figures say, written by hand for the last run and kept with the
# generated text; update it when the figures move.
READING = [
    "",
    "Reading (this host: 2 vCPUs of an Intel Xeon with AVX-512 (LLVM: sapphirerapids), one "
    "thread; each figure is one process's median, and the host is noisy). Static and symbolic "
    "are level: 0.98-1.07 in this run (an earlier run's 1.13 for resnet18 at batch 8 was "
    "noise: three processes of each gave 216.7/183.3/182.4 ms static against "
    "184.2/181.5/180.8 ms with `--dim batch=1..64`). EfficientNet-B0 was 1.09x static at batch "
    "1 and 32 before its kernels with run-time sizes could write in place "
    "(SharedKernel::inPlace; its squeeze-excite scaling took 99 us instead of 43 out of "
    "place); with that, 0.96-1.06, and its arena at batch 32 went from 294.0 to 183.8 MiB. "
    "Every kernel of the three models is compiled once (resnet18 3, EfficientNet-B0 82, "
    "each also in place where it can, the decoder 16), so a new size costs its memory plan and "
    "oneDNN calls only: the api's first run at a size is that compile plus a cold run "
    "(EfficientNet-B0 at batch 8: 0.16 s, against 0.10 s warm). The symbolic artifact keeps "
    "that across processes: a fresh `kiln bench` of it loads in 3-12 ms and compiles a size "
    "in 7-44 ms (resnet18 49 ms in all, EfficientNet-B0 51 ms, against 60-90 and 290-350 ms "
    "for a static compile from the model and ONNX Runtime's 160 and 100 ms sessions), and runs "
    "as fast as the static compile (its last column). Against ONNX Runtime: ahead on the "
    "decoder (0.48-0.54) and on EfficientNet-B0 at batch 1 and 8, level on resnet18, behind "
    "on EfficientNet-B0 at batch 32 (1.09). The decoder's table of 512 "
    "positions makes it invalid past sequence 512, so its kernels are merged for sequence up "
    "to 512 (the log says why). Every size's arena is its lower bound. The "
    "api process's peak RSS keeps every specialization's arena.",
    "",
]

MODELS = {
    "resnet18": dict(inputs=[("input", "image", (1, 3, 224, 224))],
                     axes={"input": {0: "batch"}}, out_axes={0: "batch"},
                     sizes=[{"batch": 1}, {"batch": 8}, {"batch": 64}],
                     ranges={"batch": (1, 64)}),
    "efficientnet_b0": dict(inputs=[("input", "image", (1, 3, 224, 224))],
                            axes={"input": {0: "batch"}}, out_axes={0: "batch"},
                            sizes=[{"batch": 1}, {"batch": 8}, {"batch": 32}],
                            ranges={"batch": (1, 64)}),
    "causal_lm": dict(inputs=[("ids", "ids", (2, 32))],
                      axes={"ids": {0: "batch", 1: "seq"}}, out_axes={0: "batch", 1: "seq"},
                      sizes=[{"batch": 1, "seq": 16}, {"batch": 1, "seq": 128},
                             {"batch": 1, "seq": 512}],
                      ranges={"batch": (1, 8), "seq": (1, 512)}),
}


def shape_at(name, sizes):
    """The input shape of `name` at `sizes` (symbolic dims replaced)."""
    spec = MODELS[name]
    (_, _, shape), = spec["inputs"]
    axes = spec["axes"][spec["inputs"][0][0]]
    return tuple(sizes[axes[d]] if d in axes else s for d, s in enumerate(shape))


def export(name, out_dir):
    """Exports MODELS[name] with its dims symbolic; returns the .onnx path."""
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path):
        return path
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import make_models as mm  # noqa: E402
    import torch

    spec = MODELS[name]
    torch.manual_seed(mm.SEED)
    gen = torch.Generator().manual_seed(mm.SEED + 1)
    model = mm.CausalLM(max_seq=512) if name == "causal_lm" else mm.tv(name)()
    mm.randomize(model, gen)
    model.eval()
    args = tuple(mm.make_input(shape, kind, gen) for _, kind, shape in spec["inputs"])
    tmp = path + ".tmp.onnx"
    torch.onnx.export(model, args, tmp, dynamo=True, opset_version=18,
                      input_names=[n for n, _, _ in spec["inputs"]], output_names=["output_0"],
                      dynamic_axes=dict(spec["axes"], output_0=spec["out_axes"]),
                      external_data=False)
    os.replace(tmp, path)
    return path


def make_inputs(name, sizes):
    import numpy as np

    rng = np.random.default_rng(0)
    shape = shape_at(name, sizes)
    if name == "causal_lm":
        return [rng.integers(1, 1000, size=shape, dtype=np.int64)]
    return [rng.standard_normal(shape, dtype=np.float32)]


def ort_worker(name, path, threads, runs, warmup):
    sys.path.insert(0, os.path.join(ROOT, "bench", "harness"))
    import common  # noqa: E402

    common.set_thread_env(threads)
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    t0 = time.perf_counter()
    sess = ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
    session_s = time.perf_counter() - t0
    input_name = sess.get_inputs()[0].name
    medians = []
    for sizes in MODELS[name]["sizes"]:
        feed = {input_name: make_inputs(name, sizes)[0]}
        for _ in range(warmup):
            sess.run(None, feed)
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            sess.run(None, feed)
            times.append(time.perf_counter() - t)
        medians.append(statistics.median(times))
    # common.peak_rss_kb: not ru_maxrss, which holds this driver's peak
    # (it imported PyTorch to export).
    print(json.dumps({"session_s": session_s, "median_s": medians, "ort": ort.__version__,
                      "peak_rss_kb": common.peak_rss_kb()}))


def kiln_worker(name, path, build, threads, runs, warmup):
    """The symbolic column: one Executable for all sizes, in this process."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "harness"))
    import common  # noqa: E402

    common.set_thread_env(threads)
    sys.path.insert(0, os.path.join(build, "python"))
    import kiln

    exe = kiln.compile(kiln.load(path), threads=threads)
    first, medians = [], []
    for sizes in MODELS[name]["sizes"]:
        inputs = make_inputs(name, sizes)
        t = time.perf_counter()
        exe.run(*inputs)
        first.append(time.perf_counter() - t)
        for _ in range(warmup):
            exe.run(*inputs)
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            exe.run(*inputs)
            times.append(time.perf_counter() - t)
        medians.append(statistics.median(times))
    print(json.dumps({"first_s": first, "median_s": medians, "summary": exe.summary,
                      "peak_rss_kb": common.peak_rss_kb()}))


def run_json(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), (p.stderr or p.stdout)[-800:]))
    out = json.loads(lines[-1])
    out["stderr"] = p.stderr
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "DYNAMIC.md"))
    ap.add_argument("--ort-worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--kiln-worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ort_worker:
        return ort_worker(args.ort_worker[0], args.ort_worker[1], args.threads, args.runs,
                          args.warmup)
    if args.kiln_worker:
        return kiln_worker(args.kiln_worker[0], args.kiln_worker[1], args.build, args.threads,
                           args.runs, args.warmup)
    kiln = os.path.join(args.build, "tools", "kiln")
    out_dir = os.path.join(args.build, "bench-dynamic")
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    lines = []
    for name in filter(None, args.models.split(",")):
        path = export(name, out_dir)
        ort = run_json([sys.executable, __file__, "--ort-worker", name, path, "--threads",
                        str(args.threads), "--runs", str(args.runs), "--warmup",
                        str(args.warmup)])
        sym = run_json([sys.executable, __file__, "--kiln-worker", name, path, "--build",
                        args.build, "--threads", str(args.threads), "--runs", str(args.runs),
                        "--warmup", str(args.warmup)], env=env)
        shared = [l for l in sym["stderr"].splitlines() if l.startswith("kiln: run-time sizes: ")]
        ranges = [a for s, (lo, hi) in MODELS[name]["ranges"].items()
                  for a in ("--dim", "%s=%d..%d" % (s, lo, hi))]
        art = os.path.join(out_dir, name + ".kiln")
        t0 = time.time()
        subprocess.run([kiln, "compile", path, "-o", art, "--no-cache", "--threads",
                        str(args.threads)] + ranges, check=True, stdout=subprocess.DEVNULL,
                       env=env)
        art_s, art_mib = time.time() - t0, os.path.getsize(art) / 2**20
        rows = []
        for k, sizes in enumerate(MODELS[name]["sizes"]):
            dims = [a for s, v in sizes.items() for a in ("--dim", "%s=%d" % (s, v))]
            bench = [kiln, "bench", path, "--json", "--no-cache", "--threads", str(args.threads),
                     "--runs", str(args.runs), "--warmup", str(args.warmup)] + dims
            r = run_json(bench, env=env)
            rs = run_json(bench + ranges, env=env)
            ra = run_json([kiln, "bench", art] + bench[3:], env=env)
            rows.append((sizes, r, ort["median_s"][k], rs, sym["first_s"][k], ra))
            print("%s %s: kiln static %.3f ms (compile %.2f s), symbolic %.3f ms (first run "
                  "%.2f s), ort %.3f ms" % (
                      name, sizes, r["median_s"] * 1e3, r["compile_s"], rs["median_s"] * 1e3,
                      sym["first_s"][k], ort["median_s"][k] * 1e3), file=sys.stderr)
        compile_total = sum(row[1]["compile_s"] for row in rows)
        lines.append("### %s (exported at `%s`)\n" % (name, ", ".join(
            "%s: %s" % (i, "x".join(str(d) for d in s)) for i, _, s in MODELS[name]["inputs"])))
        lines.append("| sizes | static median | symbolic median | symbolic / static | "
                     "ORT median | symbolic / ORT | static compile | api first run | "
                     "static peak RSS | symbolic arena / lower bound | artifact load + "
                     "compile | artifact median |")
        lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
                     "---: | ---: |")
        for sizes, r, o, rs, sf, ra in rows:
            sm = rs["median_s"]
            lines.append("| %s | %.3f ms | %.3f ms | %.2f | %.3f ms | %.2f | %.2f s | %.2f s | "
                         "%.0f MiB | %.1f / %.1f MiB = %.2f | %.3f + %.3f s | %.3f ms |" % (
                             ", ".join("%s=%d" % kv for kv in sizes.items()),
                             r["median_s"] * 1e3, sm * 1e3, sm / r["median_s"], o * 1e3, sm / o,
                             r["compile_s"], sf, r["peak_rss_kb"] / 1024,
                             rs["arena_bytes"] / 2**20, rs["lower_bound_bytes"] / 2**20,
                             rs["arena_bytes"] / max(rs["lower_bound_bytes"], 1),
                             ra["load_s"], ra["compile_s"], ra["median_s"] * 1e3))
        lines.append("")
        lines.append("Compile: static %.2f s over the %d sizes (one compile each); api: "
                     "%s, then %.2f s of first runs (the first one's includes that compile); "
                     "symbolic artifact: compiled once in %.2f s, %.1f MiB; "
                     "ORT's session %.2f s once. Peak RSS: api %.0f MiB over all sizes, ORT "
                     "%.0f MiB (ORT %s).\n" % (
                         compile_total, len(rows),
                         "`" + shared[0].strip() + "`" if shared else
                         "no kernels with run-time sizes",
                         sum(row[4] for row in rows), art_s, art_mib, ort["session_s"],
                         sym["peak_rss_kb"] / 1024, ort["peak_rss_kb"] / 1024, ort["ort"]))
    header = [
        "# Dynamic shapes: one export, several sizes",
        "",
        "Generated by `build/venv/bin/python bench/dynamic.py --threads %d --runs %d` "
        "(bench/dynamic.py says what each column is). Machine: %s, %d CPUs, %s; "
        "%d thread(s), median of %d runs after %d warm-up, each engine in its own process." % (
            args.threads, args.runs, platform.processor() or platform.machine(),
            os.cpu_count(), platform.platform(), args.threads, args.runs, args.warmup),
        "",
        "Static: one compile per set of sizes (`kiln bench --dim`). Symbolic: the kernels with "
        "run-time sizes compiled once for the ranges from the unbound model, then the compile "
        "for the size running them (`kiln bench --dim SYM=N --dim SYM=LO..HI`; resnet18 and "
        "efficientnet_b0 batch 1..64, causal_lm batch 1..8 and seq 1..512; memory plan and oneDNN calls per size, "
        "kernels that do not merge over the ranges compiled per size). Api: the "
        "embedding API's one Executable for all sizes, which does the same in one process; "
        "its first run at each size includes that size's compile. Artifact: the symbolic "
        "artifact of the same ranges (`kiln compile --dim SYM=LO..HI -o`), loaded by `kiln "
        "bench` in a fresh process per size, which compiles that size from its kernels.",
        "",
    ]
    with open(args.out, "w") as f:
        f.write("\n".join(header + lines + READING))
    print("wrote %s" % args.out, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
