#!/usr/bin/env python3
"""The GPU half of scripts/gpu-check.sh: runs on the GPU machine.

usage: gpu_check.py [--bundle DIR] [--out DIR] [--budget-s S] [--repeat N]
                    [--dry-run-on-cpu]

Needs only what that machine has: python3 with PyTorch 2.x (torch.compile,
Triton) and numpy, the NVIDIA driver, and the bundle scripts/gpu_bundle.py
built (default build/gpu-bundle). In --budget-s seconds (default 450, so
that the device part stays under 8 minutes), it

  1. starts the runner (bin/kiln-cuda-runner) with the carried libraries
     (lib/ and lib/std/, else lib/ and the machine's libstdc++);
  2. measures the copy-bandwidth ceiling: a 1 GiB device-to-device copy
     (torch's copy_), median of 20;
  3. per model of the manifest: makes its inputs from a seeded generator
     (scripts/make_models.py's make_input), runs PyTorch eager on the GPU
     (float32, TF32 off: the reference), saves both as .npy, and runs the
     artifact with the runner, which checks every output against PyTorch's
     at the model's tolerance (tests/models/tolerances) and times the model
     on device buffers; times PyTorch eager the same way;
  4. per bandwidth kernel: the runner on random inputs and the same
     expression in PyTorch eager and torch.compile: GB/s and the share of
     the copy ceiling;
  4b. per op case (ops/: every elementwise op at f32 and f16 on random and
     special values): the runner checks the GPU's outputs against the
     reference interpreter's, within the op's bound of the op table;
  5. then, while the budget lasts, torch.compile (default, then
     max-autotune-no-cudagraphs) of each model: compile time, run time,
     and its largest difference from eager;

and writes RESULTS-gpu.md and results.json into --out (default $OUT, else
the current folder). Every time is the median of --repeat (default 50)
warm runs, each ended by a device synchronize: the same clock for Kiln and
PyTorch. Exits 1 when a check or a run fails.

--dry-run-on-cpu checks the bundle as far as a machine without a GPU can
(the ctest gpu-check-bundle, with the venv's PyTorch 2.x): the runner
starts with the carried libraries, every model is built from make_models
and its weights and runs in PyTorch on the CPU, and the tables are written;
nothing runs on a GPU and no time means anything.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
import types

import numpy as np
import torch

SEED_INPUTS = 20240611


def log(msg):
    print("gpu_check.py: " + msg, flush=True)


DEVICE = "cuda"  # "cpu" with --dry-run-on-cpu


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def time_cuda(fn, repeat, warmup=5):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def library_dirs():
    """Where this machine keeps libcublasLt.so.13 and libcudnn.so.9 beside
    the toolkit's /usr/local/cuda/lib64 (which the runtime tries itself):
    PyTorch's nvidia wheels."""
    import glob
    base = os.path.dirname(os.path.dirname(torch.__file__))
    found = []
    for name in ("libcublasLt.so.13", "libcudnn.so.9"):
        found += glob.glob(os.path.join(base, "nvidia", "**", name), recursive=True)
    return sorted({os.path.dirname(f) for f in found})


def runner_env(bundle):
    """The environment the runner starts in: the carried libraries, with
    the carried libstdc++ when this glibc takes it, and the folders of
    cuBLASLt and cuDNN."""
    runner = os.path.join(bundle, "bin", "kiln-cuda-runner")
    lib = os.path.join(bundle, "lib")
    tried = []
    extra = "".join(":" + d for d in library_dirs() + [os.environ.get("LD_LIBRARY_PATH", "")]
                    if d)
    for path, how in ((lib + ":" + os.path.join(lib, "std"), "carried libstdc++"),
                      (lib, "this machine's libstdc++")):
        env = dict(os.environ, LD_LIBRARY_PATH=path + extra)
        p = subprocess.run([runner, "--help"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
        if p.returncode == 0:
            return runner, env, how
        tried.append("%s: %s" % (how, p.stdout.strip()[:400]))
    raise SystemExit("gpu_check.py: FAIL: the runner does not start here:\n" + "\n".join(tried))


def run_runner(runner, env, args, timeout=180):
    p = subprocess.run([runner] + args + ["--json"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace", timeout=timeout)
    result = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
    return p.returncode, p.stdout, result


def import_make_models(bundle):
    """scripts/make_models.py as the bundle carries it; torchvision (which
    it imports, and which the models here do not use) stubbed when absent."""
    try:
        import torchvision  # noqa: F401
    except ImportError:
        sys.modules["torchvision"] = types.ModuleType("torchvision")
    try:
        import onnx  # noqa: F401
    except ImportError:
        sys.modules["onnx"] = types.ModuleType("onnx")
        sys.modules["onnx"].numpy_helper = None
    sys.path.insert(0, os.path.join(bundle, "torch"))
    import make_models
    torch.set_num_threads(os.cpu_count() or 1)
    return make_models


def build_module(bundle, m, mm, row):
    """The entry's model in PyTorch: make_models' definition with its
    weights; a torchvision model from its TorchScript (its weights), as an
    nn.Module when torchvision is here, else the TorchScript module itself
    (eager only: torch.compile does not take it)."""
    if m.get("torch") == "torchscript":
        scripted = torch.jit.load(os.path.join(bundle, "torch", m["model"] + ".ts"),
                                  map_location="cpu")
        try:
            import torchvision  # noqa: F401
            module = mm.MODELS[m["model"]]["build"]()
            module.load_state_dict(scripted.state_dict(), strict=True)
        except (ImportError, AttributeError):
            module = scripted
            row["torchscript"] = True
            row.setdefault("notes", []).append(
                "PyTorch runs its TorchScript (no torchvision here): no torch.compile")
    else:
        module = mm.MODELS[m["model"]]["build"]()
        state = torch.load(os.path.join(bundle, "torch", m["model"] + ".pt"), map_location="cpu")
        module.load_state_dict(state, strict=True)
    return module.eval().to(DEVICE)


def max_diff(a, b):
    a = [x.float() for x in a]
    b = [x.float() for x in b]
    return max(float((x - y).abs().max()) if x.numel() else 0.0 for x, y in zip(a, b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default=os.path.join("build", "gpu-bundle"))
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--budget-s", type=float, default=450)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--dry-run-on-cpu", action="store_true")
    args = ap.parse_args()
    global DEVICE
    dry = args.dry_run_on_cpu
    if dry:
        DEVICE = "cpu"
        args.repeat = 1
    start = time.time()
    left = lambda: args.budget_s - (time.time() - start)  # noqa: E731
    bundle = os.path.abspath(args.bundle)
    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    if not dry and not torch.cuda.is_available():
        raise SystemExit("gpu_check.py: FAIL: PyTorch sees no GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gpu = "no GPU: a dry run on the CPU" if dry else torch.cuda.get_device_name(0)
    runner, env, libs = runner_env(bundle)
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "absent"
    log("%s; PyTorch %s, Triton %s; %s; runner with %s" % (
        gpu, torch.__version__, triton_version, manifest["kiln"], libs))
    failures = []

    # The copy ceiling: a 1 GiB device-to-device copy reads and writes it.
    x = torch.empty(2**20 if dry else 2**28, dtype=torch.float32, device=DEVICE)
    y = torch.empty_like(x)
    ms = time_cuda(lambda: y.copy_(x), 20)
    ceiling = 2 * x.numel() * 4 / (ms * 1e-3) / 1e9
    del x, y
    log("copy ceiling: %.0f GB/s (1 GiB copy, %.3f ms)" % (ceiling, ms))

    mm = import_make_models(bundle)
    rows = []
    models = {}
    for m in manifest["models"]:
        row = dict(entry=m["entry"], model=" ".join([m["model"]] + m.get("flags", [])),
                   batch=m["batch"])
        rows.append(row)
        try:
            module = build_module(bundle, m, mm, row)
            gen = torch.Generator().manual_seed(SEED_INPUTS)
            inputs = [mm.make_input(tuple(i["shape"]), i["kind"], gen) for i in m["inputs"]]
            flags = []
            for spec, t in zip(m["inputs"], inputs):
                path = os.path.join(work, "%s-%s.npy" % (m["entry"], spec["name"]))
                np.save(path, t.numpy())
                flags += ["--input", "%s=%s" % (spec["name"], path)]
            cuda_inputs = [t.to(DEVICE) for t in inputs]
            with torch.no_grad():
                want = mm.flat_outputs(module(*cuda_inputs))
                for k, o in enumerate(want):
                    path = os.path.join(work, "%s-expected-%d.npy" % (m["entry"], k))
                    np.save(path, o.cpu().numpy())
                    flags += ["--expect", "%d=%s" % (k, path)]
                row["eager_ms"] = time_cuda(lambda: module(*cuda_inputs), args.repeat)
            models[m["entry"]] = (module, cuda_inputs, want)
            if dry:
                log("%s: built, %d outputs (dry run: the runner is not run)" % (
                    m["entry"], len(want)))
                continue
            rc, text, res = run_runner(runner, env, [
                os.path.join(bundle, m["artifact"]), "--rtol", str(m["rtol"]), "--atol",
                str(m["atol"]), "--repeat", str(args.repeat), "--warmup", "5"] + flags)
            if res is None:
                raise RuntimeError("the runner failed (exit %d):\n%s" % (rc, text[-2000:]))
            row.update(kiln_ms=res["device_ms"], kiln_steps_ms=res["steps_ms"],
                       kiln_host_ms=res["host_ms"], ok=res["ok"], checks=res["checks"],
                       image=res["image"], graph=res["graph"],
                       kernels="%d + %d" % (res["kernels"], res["products"] + res["cudnn"]))
            if not res["graph"].startswith("a CUDA graph"):
                row.setdefault("notes", []).append(res["graph"])
            if not res["ok"]:
                failures.append("%s: %s" % (m["entry"], "; ".join(
                    c["detail"] for c in res["checks"] if not c["ok"])))
            log("%s: kiln %.4f ms (%s), eager %.4f ms" % (
                m["entry"], row["kiln_ms"], "ok" if res["ok"] else "CHECK FAILED",
                row["eager_ms"]))
        except Exception as e:  # one model's failure is reported, the rest still run
            row["error"] = str(e)
            failures.append("%s: %s" % (m["entry"], e))
            log("%s: FAIL: %s" % (m["entry"], e))

    kernel_rows = []
    for k in [] if dry else manifest["kernels"]:
        row = dict(name=k["name"])
        kernel_rows.append(row)
        try:
            rc, text, res = run_runner(runner, env, [
                os.path.join(bundle, k["artifact"]), "--random", "--repeat", str(args.repeat),
                "--warmup", "3"])
            if res is None:
                raise RuntimeError("the runner failed (exit %d):\n%s" % (rc, text[-2000:]))
            row["bytes"] = res["io_bytes"]
            row["kiln_ms"] = res["device_ms"]
            env_vars = {i["name"]: torch.randn(i["shape"], device=DEVICE) for i in k["inputs"]}
            fn = eval("lambda %s: %s" % (", ".join(env_vars), k["torch"]))
            vals = list(env_vars.values())
            row["eager_ms"] = time_cuda(lambda: fn(*vals), args.repeat)
            compiled = torch.compile(fn)
            row["compile_ms"] = time_cuda(lambda: compiled(*vals), args.repeat)
            for key in ("kiln", "eager", "compile"):
                row[key + "_gbs"] = row["bytes"] / (row[key + "_ms"] * 1e-3) / 1e9
            log("%s: kiln %.0f GB/s (%.0f%% of the copy ceiling), eager %.0f, torch.compile %.0f"
                % (k["name"], row["kiln_gbs"], 100 * row["kiln_gbs"] / ceiling,
                   row["eager_gbs"], row["compile_gbs"]))
            del env_vars, vals
        except Exception as e:
            row["error"] = str(e)
            failures.append("%s: %s" % (k["name"], e))
            log("%s: FAIL: %s" % (k["name"], e))

    op_rows = []
    for c in manifest.get("ops", []):
        folder = os.path.join(bundle, c["folder"])
        flags = []
        for k, name in enumerate(c["inputs"]):
            flags += ["--input", "%s=%s" % (name, os.path.join(folder, "input_%d.npy" % k))]
        flags += ["--expect", "0=" + os.path.join(folder, "expected_0.npy")]
        row = dict(case=c["case"])
        op_rows.append(row)
        if dry:
            missing = [f for f in flags if "=" in f and not os.path.exists(f.split("=", 1)[1])]
            row["ok"] = None  # not run
            if missing:
                failures.append("%s: missing %s" % (c["case"], missing))
            continue
        if left() < 90:
            row["ok"] = None
            continue
        rc, text, res = run_runner(runner, env, [
            os.path.join(folder, "model.kiln"), "--rtol", repr(c["rtol"]), "--atol",
            repr(c["atol"]), "--repeat", "1", "--warmup", "0"] + flags)
        row["ok"] = bool(res and res["ok"])
        if not row["ok"]:
            detail = "; ".join(x["detail"] for x in res["checks"]) if res else text[-500:]
            failures.append("op %s (%d ulps): %s" % (c["case"], c["ulps"], detail))
    if op_rows:
        log("ops: %d of %d cases within their bounds, %d not run%s" % (
            sum(1 for r in op_rows if r["ok"]), len(op_rows),
            sum(1 for r in op_rows if r["ok"] is None), " (dry run)" if dry else " (budget)"))

    # torch.compile last: what the budget allows, cheapest mode first.
    for mode in () if dry else ("default", "max-autotune-no-cudagraphs"):
        for row in rows:
            if row["entry"] not in models or row.get("torchscript"):
                continue
            key = "compile_ms" if mode == "default" else "autotune_ms"
            if left() < 60:
                row[key] = None
                row.setdefault("notes", []).append("%s: not run (budget)" % mode)
                continue
            module, cuda_inputs, want = models[row["entry"]]
            try:
                torch._dynamo.reset()
                fn = torch.compile(module, mode=None if mode == "default" else mode)
                t0 = time.perf_counter()
                with torch.no_grad():
                    got = mm.flat_outputs(fn(*cuda_inputs))
                    sync()
                    row[key.replace("_ms", "_compile_s")] = time.perf_counter() - t0
                    row[key] = time_cuda(lambda: fn(*cuda_inputs), args.repeat)
                row[key.replace("_ms", "_diff")] = max_diff(got, want)
                log("%s: torch.compile %s %.4f ms (compiled in %.0f s)" % (
                    row["entry"], mode, row[key], row[key.replace("_ms", "_compile_s")]))
            except Exception as e:
                row[key] = None
                row.setdefault("notes", []).append("%s: %s" % (mode, str(e)[:200]))
                log("%s: torch.compile %s failed: %s" % (row["entry"], mode, e))

    write_results(args.out, gpu, manifest, libs, triton_version, ceiling, rows, kernel_rows,
                  op_rows, failures, args.repeat, time.time() - start)
    log("done in %.0f s; %d failure(s)" % (time.time() - start, len(failures)))
    return 1 if failures else 0


def fmt(v, digits=4):
    return "-" if v is None else ("%.*f" % (digits, v))


def ratio(a, b):
    return "-" if a is None or b is None else "%.2f" % (a / b)


def write_results(out, gpu, manifest, libs, triton_version, ceiling, rows, kernel_rows, op_rows,
                  failures, repeat, seconds):
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(dict(gpu=gpu, torch=torch.__version__, triton=triton_version,
                       kiln=manifest["kiln"], ceiling_gbs=ceiling, models=rows,
                       kernels=kernel_rows, failures=failures), f, indent=1)
    lines = [
        "# Kiln on the GPU: scripts/gpu-check.sh",
        "",
        "Written by scripts/gpu_check.py on %s (UTC), in %.0f s." % (
            datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), seconds),
        "",
        "- GPU: %s; PyTorch %s, Triton %s; %s (runner with %s)." % (
            gpu, torch.__version__, triton_version, manifest["kiln"], libs),
        "- Every time: milliseconds, the median of %d warm runs, each ended by a device "
        "synchronize, inputs and outputs in device memory (Kiln: CudaModel::runOnDevice; "
        "`host` adds Kiln's copies from and to the host). Float32; TF32 off." % repeat,
        "- Correctness: every Kiln output against PyTorch eager's on the GPU, at the model's "
        "tolerance of tests/models/tolerances; torch.compile's largest difference from eager "
        "is listed beside it.",
        "- Copy ceiling: %.0f GB/s (a 1 GiB device-to-device copy)." % ceiling,
        "",
        "## Models",
        "",
        "| model | batch | kernels + library calls | Kiln | Kiln, no graph | Kiln host | eager | "
        "torch.compile | max-autotune-no-cudagraphs | compile / Kiln | autotune / Kiln | check |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        check = ("error: " + r["error"][:120] if "error" in r else
                 "not run" if r.get("ok") is None else "ok" if r["ok"] else "FAIL")
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["model"], r["batch"], r.get("kernels", "-"), fmt(r.get("kiln_ms")),
            fmt(r.get("kiln_steps_ms")), fmt(r.get("kiln_host_ms")), fmt(r.get("eager_ms")), fmt(r.get("compile_ms")),
            fmt(r.get("autotune_ms")), ratio(r.get("compile_ms"), r.get("kiln_ms")),
            ratio(r.get("autotune_ms"), r.get("kiln_ms")), check))
    gains = [r["kiln_steps_ms"] / r["kiln_ms"] for r in rows
             if r.get("kiln_ms") and r.get("kiln_steps_ms")]
    lines += ["", "A ratio above 1: Kiln is faster. `Kiln`: its steps replayed as one CUDA graph; "
              "`no graph`: launched one by one (the graph's gain: %s)." % (
                  "geometric mean %.2fx" % statistics.geometric_mean(gains) if gains else "-"),
              "", "## Bandwidth kernels", "",
              "| kernel | bytes moved | Kiln GB/s | % of copy ceiling | eager GB/s | "
              "torch.compile GB/s |", "|---|---|---|---|---|---|"]
    for r in kernel_rows:
        if "error" in r:
            lines.append("| %s | error: %s | | | | |" % (r["name"], r["error"][:120]))
            continue
        lines.append("| %s | %d | %.0f | %.0f%% | %.0f | %.0f |" % (
            r["name"], r["bytes"], r["kiln_gbs"], 100 * r["kiln_gbs"] / ceiling, r["eager_gbs"],
            r["compile_gbs"]))
    passed = [r["case"] for r in op_rows if r["ok"]]
    skipped = [r["case"] for r in op_rows if r["ok"] is None]
    lines += ["", "## Ops against the reference interpreter", "",
              "%d of %d cases (every elementwise op of one or two operands at f32 and f16, on "
              "random and special values) within the op's bound; %d not run." % (
                  len(passed), len(op_rows), len(skipped))]
    notes = ["%s: %s" % (r["entry"], "; ".join(r["notes"])) for r in rows if r.get("notes")]
    if failures or notes:
        lines += ["", "## Failures and notes", ""] + ["- " + x for x in failures + notes]
    with open(os.path.join(out, "RESULTS-gpu.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
