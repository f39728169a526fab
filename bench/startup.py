#!/usr/bin/env python3
"""Start-up of a compiled model: Kiln's cold compile and artifact load against
ONNX Runtime's session creation, and the peak memory of running an artifact
with kiln-runner (no LLVM in the process) against ONNX Runtime's.

usage: build/venv/bin/python bench/startup.py [--build build] [--models a,b] [--repeat 3]
                                              [--out bench/STARTUP.md]

For each zoo model (build/tests/models/zoo and zoo-dynamo, the newest opset
export of each), at one thread, every measure in a fresh process:
  ort session    InferenceSession construction (ORT_ENABLE_ALL), median of --repeat
  ort rss        peak RSS of that process after one run (python, numpy, ORT)
  kiln cold      `kiln bench MODEL --no-cache --runs 1`'s compile_s (import excluded), once
  kiln warm      the same with the compile cache holding the model (a hit: the
                 stored artifact loaded; key hashing included), median of --repeat
  kiln load      `kiln bench MODEL.kiln --runs 1`'s load_s: loadArtifact (map,
                 checksum, link the kernels, rebuild oneDNN primitives), median
                 of --repeat
  runner rss     peak RSS of `kiln-runner MODEL.kiln` (one run on zeros)
The artifact is `kiln compile MODEL -o` with the test data's dims. Writes a
markdown table with the ratios and the goals of issue 14 (warm compile and
load <= ORT session, runner RSS < ORT RSS, cold compile <= 3x ORT session).
The compile cache is a temporary folder (KILN_CACHE_DIR), not the user's.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
from kiln_onnx import dim_flags  # noqa: E402


def size_flags(model_dir):
    """--dim SYM=N for every symbolic dim of the model's inputs, sized as
    test_data_set_0 has them: the zoo's info.json lists only the dims
    exported as dynamic, and a symbol no --dim names would make `-o` write
    a symbolic artifact, whose load compiles its size."""
    import onnx

    flags = dim_flags(model_dir)
    named = {flags[i + 1].split("=")[0] for i in range(0, len(flags), 2)}
    m = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    sys.path.insert(0, os.path.join(ROOT, "bench", "harness"))
    import common  # noqa: E402

    arrays = dict(common.load_data(model_dir)[0])
    for inp in m.graph.input:
        if inp.name not in arrays:
            continue
        for axis, d in enumerate(inp.type.tensor_type.shape.dim):
            if d.dim_param and d.dim_param not in named:
                named.add(d.dim_param)
                flags += ["--dim", "%s=%d" % (d.dim_param, arrays[inp.name].shape[axis])]
    return flags


def ort_worker(model_dir):
    import time

    sys.path.insert(0, os.path.join(ROOT, "bench", "harness"))
    import common  # noqa: E402

    common.set_thread_env(1)
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    inputs, _ = common.load_data(model_dir)
    t0 = time.perf_counter()
    sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), sess_options=so,
                                providers=["CPUExecutionProvider"])
    t1 = time.perf_counter()
    names = [i.name for i in sess.get_inputs()]
    sess.run(None, {n: a for n, (_, a) in zip(names, inputs)})
    print(json.dumps({"session_s": t1 - t0,
                      "peak_rss_kb": common.peak_rss_kb()}))


def run_json(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), p.stderr[-500:]))
    return json.loads(lines[-1])


def models(build, only):
    found = {}
    for zoo in ("zoo", "zoo-dynamo"):
        base = os.path.join(build, "tests", "models", zoo)
        if not os.path.isdir(base):
            continue
        for d in sorted(os.listdir(base)):
            if not os.path.exists(os.path.join(base, d, "model.onnx")):
                continue
            name, _, opset = d.rpartition("-op")
            key = (zoo, name)
            if only and name not in only:
                continue
            if key not in found or int(opset) > int(found[key].rpartition("-op")[2]):
                found[key] = os.path.join(base, d)
    return [found[k] for k in sorted(found)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "STARTUP.md"))
    ap.add_argument("--ort-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ort_worker:
        return ort_worker(args.ort_worker)
    kiln = os.path.join(args.build, "tools", "kiln")
    runner = os.path.join(args.build, "tools", "kiln-runner")
    only = set(filter(None, args.models.split(",")))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KILN_CACHE_DIR"] = os.path.join(tmp, "cache")
        os.environ.pop("KILN_CACHE", None)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        for d in models(args.build, only):
            label = os.path.relpath(d, os.path.join(args.build, "tests", "models"))
            model = os.path.join(d, "model.onnx")
            data = os.path.join(d, "test_data_set_0")
            art = os.path.join(tmp, "m.kiln")
            try:
                ort = [run_json([sys.executable, __file__, "--ort-worker", d])
                       for _ in range(args.repeat)]
                bench = [kiln, "bench", model, "--json", "--runs", "1", "--warmup", "0",
                         "--threads", "1", "--data", data]
                cold = run_json(bench + ["--no-cache"])
                # Stores the cache entry (a miss) and writes the artifact.
                saved = subprocess.run([kiln, "compile", model, "-o", art, "--threads", "1"] +
                                       size_flags(d), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True)
                if saved.returncode != 0 and "compiled in stages" in saved.stderr:
                    # A model compiled in stages (Note [Data-dependent
                    # shapes] in codegen/Staged.cpp) is neither cached nor
                    # saved: its last stage compiles when a run gives sizes.
                    rows.append((label, {"cold_s": cold["compile_s"],
                                         "ort_session_s": statistics.median(
                                             o["session_s"] for o in ort)},
                                 "not saved or cached: compiled in stages, the last when a "
                                 "run gives its sizes"))
                    print("%s: staged" % label, file=sys.stderr)
                    continue
                if saved.returncode != 0:
                    raise RuntimeError("kiln compile -o failed: " + saved.stderr.strip())
                warm = [run_json(bench) for _ in range(args.repeat)]
                if any(w.get("cache") != "hit" for w in warm):
                    raise RuntimeError("the warm compile missed the cache: %s" % warm[0])
                loads = [run_json([kiln, "bench", art, "--json", "--runs", "1", "--warmup", "0",
                                   "--threads", "1", "--data", data]) for _ in range(args.repeat)]
                t = subprocess.run(["/usr/bin/time", "-f", "RSS %M", runner, art, "--threads",
                                    "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True, env=env)
                rss = int(re.search(r"RSS (\d+)", t.stderr).group(1))
            except (RuntimeError, subprocess.CalledProcessError, AttributeError) as e:
                rows.append((label, None, str(e)[:200]))
                print("%s: error %s" % (label, e), file=sys.stderr)
                continue
            r = {
                "ort_session_s": statistics.median(o["session_s"] for o in ort),
                "ort_rss_kb": statistics.median(o["peak_rss_kb"] for o in ort),
                "cold_s": cold["compile_s"],
                "warm_s": statistics.median(w["compile_s"] for w in warm),
                "load_s": statistics.median(l["load_s"] for l in loads),
                "check": loads[0]["check"],
                "runner_rss_kb": rss,
                "size": os.path.getsize(art),
            }
            rows.append((label, r, ""))
            print("%s: %s" % (label, json.dumps(r)), file=sys.stderr)

    ok = [r for _, r, _ in rows if r and "warm_s" in r]
    partial = [r for _, r, _ in rows if r and "warm_s" not in r]  # not saved: cold only
    lines = ["# Start-up: compile, artifact load, memory", "",
             "Generated by `build/venv/bin/python bench/startup.py` (do not edit). Machine: %s, "
             "%d CPUs; one thread; median of %d fresh processes for ORT's session and Kiln's "
             "load, one cold compile." % (platform.processor() or platform.machine(),
                                          os.cpu_count(), args.repeat), "",
             "| model | ORT session | Kiln cold compile | x ORT | warm compile | x ORT | "
             "artifact load | x ORT | ORT peak RSS | kiln-runner peak RSS | x ORT | artifact | "
             "check |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
             "--- |"]
    for label, r, err in rows:
        if not r:
            lines.append("| %s | error: %s |" % (label, err.replace("|", "/")))
            continue
        if "warm_s" not in r:
            lines.append("| %s | %.1f ms | %.1f ms | %.2f | %s |" % (
                label, r["ort_session_s"] * 1e3, r["cold_s"] * 1e3,
                r["cold_s"] / r["ort_session_s"], err))
            continue
        lines.append("| %s | %.1f ms | %.1f ms | %.2f | %.1f ms | %.2f | %.1f ms | %.2f | "
                     "%.1f MiB | %.1f MiB | %.2f | %.1f MiB | %s |" % (
                         label, r["ort_session_s"] * 1e3, r["cold_s"] * 1e3,
                         r["cold_s"] / r["ort_session_s"], r["warm_s"] * 1e3,
                         r["warm_s"] / r["ort_session_s"], r["load_s"] * 1e3,
                         r["load_s"] / r["ort_session_s"], r["ort_rss_kb"] / 1024,
                         r["runner_rss_kb"] / 1024, r["runner_rss_kb"] / r["ort_rss_kb"],
                         r["size"] / 2**20, r["check"]))
    if ok:
        def count(pred):
            return sum(1 for r in ok if pred(r))
        lines += ["", "Goals (issue 14), models meeting them of the %d measured in full (rows "
                  "that say 'not saved' or 'error' count in none; the cold compile is over the %d "
                  "with one):" % (len(ok), len(ok) + len(partial)), "",
                  "- warm compile <= ORT session creation: %d" %
                  count(lambda r: r["warm_s"] <= r["ort_session_s"]),
                  "- artifact load <= ORT session creation: %d" %
                  count(lambda r: r["load_s"] <= r["ort_session_s"]),
                  "- kiln-runner peak RSS < ORT's: %d" %
                  count(lambda r: r["runner_rss_kb"] < r["ort_rss_kb"]),
                  "- cold compile <= 3x ORT session creation: %d" %
                  sum(1 for r in ok + partial if r["cold_s"] <= 3 * r["ort_session_s"]),
                  "- geometric mean, warm compile / ORT session: %.2f" %
                  statistics.geometric_mean(r["warm_s"] / r["ort_session_s"] for r in ok),
                  "- geometric mean, artifact load / ORT session: %.2f" %
                  statistics.geometric_mean(r["load_s"] / r["ort_session_s"] for r in ok),
                  "- geometric mean, cold compile / ORT session: %.2f" %
                  statistics.geometric_mean(r["cold_s"] / r["ort_session_s"]
                                            for r in ok + partial)]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s" % args.out, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
