#!/usr/bin/env python3
"""Builds the bundle scripts/gpu-check.sh carries to a GPU machine.

usage: gpu_bundle.py --kiln KILN --runner KILN_CUDA_RUNNER --out DIR [--max-mib N]

The GPU machine has the NVIDIA driver, Python with PyTorch 2.x (and
Triton), numpy and onnx, but no LLVM, oneDNN, protobuf development files or
apt, and nothing can be fetched there. So everything Kiln-side is made here,
with Debian's /usr/bin/python3 (torch 1.13, as the zoo):

  bin/kiln-cuda-runner   the runner (tools/runner/KilnCudaRunner.cpp): no
                         compiler, no LLVM, no oneDNN;
  lib/                   the libraries it needs beyond glibc (ldd), carried;
                         libstdc++ and libgcc_s apart, in lib/std/: Debian
                         12's need glibc 2.36, and a machine with an older
                         glibc has its own, new enough (GCC 12's) or not;
  models/ENTRY.kiln      each model of MODELS below exported to ONNX here
                         (opset 17) at the entry's batch and compiled by
                         `kiln compile --target cuda --cuda-arch sm_90 -o`;
  kernels/NAME.kiln      the bandwidth kernels of KERNELS (.kir), compiled so;
  ops/OP-DTYPE/          every elementwise op of the op table (`kiln ops`) of
                         one or two operands and no required attribute, at
                         f32 and f16 on [4, 131] values (random, and the
                         special ones: +-0, +-inf, NaN, subnormal, huge),
                         compiled so, with its inputs and the reference
                         interpreter's outputs (`kiln run`), and the op's
                         bound (ulps) as rtol and atol: the GPU's math
                         library against the reference;
  torch/NAME.pt          each model's weights (state_dict, equal tensors
                         stored once), and
  torch/make_models.py   its definition, for PyTorch on the GPU machine;
  torch/NAME.ts          a torchvision model traced to TorchScript (weights
                         included): that machine may have no torchvision;
  manifest.json          what is where: entries, inputs (shape, kind), the
                         tolerances of tests/models/tolerances, the glibc
                         version the carried binaries need.

The GPU side (scripts/gpu_check.py) makes the inputs from the same seeded
generator, runs PyTorch eager (the reference: float32, TF32 off) and
torch.compile, and the runner on the artifacts. Exits 1 when anything fails
or the bundle is over --max-mib (default 64: what a device call carries).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (entry, make_models name, batch, kiln compile flags): the models the CUDA
# backend runs whole (no convolution, pooling or recurrent layer yet), at
# the batch the zoo exports (None) and at a large one; the batch is dim 0
# of every input. One also with its matrix products as generated kernels
# (--no-libraries): what cuBLASLt gains, and a second opinion should a
# product's call be wrong.
MODELS = [
    ("mlp-b64", "mlp", None, []),
    ("mlp-b1", "mlp", 1, []),
    ("mlp-b4096", "mlp", 4096, []),
    ("pointwise", "pointwise", None, []),
    ("transformer_encoder-b1", "transformer_encoder", None, []),
    ("transformer_encoder-b1-no-libraries", "transformer_encoder", None, ["--no-libraries"]),
    ("transformer_encoder-b32", "transformer_encoder", 32, []),
    ("text_classifier-b2", "text_classifier", None, []),
    ("text_classifier-b64", "text_classifier", 64, []),
    ("seq2seq-b1", "seq2seq", None, []),
    ("seq2seq-b16", "seq2seq", 16, []),
    ("small_cnn-b8", "small_cnn", None, []),
    ("small_cnn-b256", "small_cnn", 256, []),
    ("squeezenet1_1-b1", "squeezenet1_1", None, []),
    ("squeezenet1_1-b32", "squeezenet1_1", 32, []),
]
# The models torchvision defines (make_models.tv): shipped as TorchScript.
TORCHVISION = {"squeezenet1_1"}

# Bandwidth kernels at sizes past any cache (the H200's L2 is 50 MiB): each
# a .kir graph and the PyTorch expression gpu_check.py times beside it.
KERNELS = {
    "add-f32-64Mi": ("""graph @add(%x: f32[8192,8192], %y: f32[8192,8192]) -> (f32[8192,8192]) {
  %z = add(%x, %y) : f32[8192,8192]
  return %z
}""", "x + y"),
    "gelu-f32-64Mi": ("""graph @gelu(%x: f32[8192,8192]) -> (f32[8192,8192]) {
  %z = gelu(%x) : f32[8192,8192]
  return %z
}""", "torch.nn.functional.gelu(x)"),
    "softmax-f32-16Ki-rows-of-4096": ("""graph @softmax(%x: f32[16384,4096]) -> (f32[16384,4096]) {
  %z = softmax(%x) : f32[16384,4096]
  return %z
}""", "torch.softmax(x, -1)"),
    "layer_norm-f32-64Ki-rows-of-1024": ("""graph @ln(%x: f32[65536,1024], %g: f32[1024], %b: f32[1024]) -> (f32[65536,1024]) {
  %z = layer_norm(%x, %g, %b) {axis = -1} : f32[65536,1024]
  return %z
}""", "torch.nn.functional.layer_norm(x, (1024,), g, b)"),
}


def log(msg):
    print("gpu_bundle.py: " + msg, flush=True)


def tolerances():
    """NAME -> (rtol, atol) from tests/models/tolerances."""
    tol = {}
    with open(os.path.join(ROOT, "tests", "models", "tolerances")) as f:
        for line in f:
            fields = line.split("#")[0].split()
            if len(fields) >= 4:
                tol[fields[0]] = (float(fields[2]), float(fields[3]))
    return tol


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace", **kw)
    if p.returncode != 0:
        log("FAIL: %s\n%s" % (" ".join(cmd), p.stdout))
        sys.exit(1)
    return p.stdout


def carry_libraries(binary, lib_dir):
    """Copies what `binary` loads beyond glibc into lib_dir (the compiler's
    runtime into lib_dir/std); their paths under lib_dir."""
    os.makedirs(os.path.join(lib_dir, "std"), exist_ok=True)
    glibc = re.compile(r"^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|"
                       r"librt\.so)")
    names = []
    for line in run(["ldd", binary]).splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m and not glibc.match(m.group(1)):
            name = m.group(1)
            if name.startswith(("libstdc++.so", "libgcc_s.so")):
                name = "std/" + name
            shutil.copy2(os.path.realpath(m.group(2)), os.path.join(lib_dir, name))
            names.append(name)
    return names


def glibc_needed(paths):
    """The newest GLIBC_x.y symbol version any of `paths` needs."""
    best = (0, 0)
    for p in paths:
        for v in re.findall(r"GLIBC_(\d+)\.(\d+)", run(["objdump", "-T", p])):
            best = max(best, (int(v[0]), int(v[1])))
    return "%d.%d" % best


OP_SHAPE = (4, 131)
# The special values of row 1 (cycled): signed zeros, infinities, NaN,
# subnormals, the largest finite, values around exp's overflow.
SPECIAL = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-40,
           3e38, -3e38, 0.5, 2.0, 1e-7, 100.0, -100.0, 88.7, -88.7, 1e4, -0.75]
EPSILON = {"f32": 2.0**-23, "f16": 2.0**-10}


def op_inputs(operands, dtype, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    arrays = []
    for k in range(operands):
        a = np.empty(OP_SHAPE, dtype=np.float64)
        a[0] = rng.normal(0, 3, OP_SHAPE[1])
        a[1] = np.roll(np.resize(SPECIAL, OP_SHAPE[1]), 7 * k)
        a[2] = rng.uniform(-1, 1, OP_SHAPE[1])
        a[3] = rng.normal(0, 100, OP_SHAPE[1])
        with np.errstate(over="ignore"):
            arrays.append(a.astype(np.float32 if dtype == "f32" else np.float16))
    return arrays


def build_ops(kiln, out, tmp):
    """ops/: each elementwise op the table lists that takes floats; the
    manifest entries."""
    import numpy as np
    cases = []
    for line in run([kiln, "ops"]).splitlines()[2:]:
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) < 6 or "elementwise" not in cells[3] or "required" in cells[5]:
            continue
        name, operands, ulps = cells[0], int(cells[1]), int(cells[4])
        if operands > 2 or cells[2] != "1":
            continue
        for dtype in ("f32", "f16"):
            case = "%s-%s" % (name, dtype)
            folder = os.path.join(out, "ops", case)
            os.makedirs(folder)
            names = ["x", "y"][:operands]
            shape = "%s[%d,%d]" % (dtype, OP_SHAPE[0], OP_SHAPE[1])
            kir = os.path.join(tmp, case + ".kir")
            compiled = False
            for result in (dtype, "bool"):  # a comparison's result is bool
                with open(kir, "w") as f:
                    f.write("graph @%s(%s) -> (%s[%d,%d]) {\n  %%z = %s(%s) : %s[%d,%d]\n"
                            "  return %%z\n}\n" % (
                                name.replace("_", ""), ", ".join("%%%s: %s" % (n, shape)
                                                                for n in names),
                                result, OP_SHAPE[0], OP_SHAPE[1], name,
                                ", ".join("%" + n for n in names), result, OP_SHAPE[0],
                                OP_SHAPE[1]))
                p = subprocess.run([kiln, "compile", kir, "--target", "cuda", "--cuda-arch",
                                    "sm_90", "-o", os.path.join(folder, "model.kiln")],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                if p.returncode == 0:
                    compiled = True
                    break
            if not compiled:  # the op takes no floats (and, bitwise_or, ...)
                shutil.rmtree(folder)
                continue
            flags = []
            for k, a in enumerate(op_inputs(operands, dtype, 20240611 + len(cases))):
                path = os.path.join(folder, "input_%d.npy" % k)
                np.save(path, a)
                flags += ["--input", "%s=%s" % (names[k], path)]
            run([kiln, "run", kir, "--output-dir", folder] + flags)
            os.rename(os.path.join(folder, "output_0.npy"), os.path.join(folder, "expected_0.npy"))
            eps = EPSILON[dtype]
            cases.append(dict(case=case, op=name, dtype=dtype, ulps=ulps, inputs=names,
                              folder="ops/" + case, rtol=ulps * eps, atol=ulps * eps / 2))
    return cases


def save_weights(model, path, mm):
    """model's state_dict with equal tensors sharing one storage (torch.save
    then writes it once: nn.TransformerEncoder's layers start as copies)."""
    seen = {}
    state = {}
    for key, t in model.state_dict().items():
        t = t.detach().contiguous()
        fingerprint = (t.dtype, tuple(t.shape), t.numpy().tobytes())
        state[key] = seen.setdefault(fingerprint, t)
    mm.torch.save(state, path)


def export(name, batch, out_onnx, mm):
    """make_models' NAME at `batch` exported to ONNX (opset 17); its inputs."""
    spec = mm.MODELS[name]
    inputs = [(n, tuple(shape) if batch is None else (batch,) + tuple(shape[1:]), kind)
              for n, shape, kind in spec["inputs"]]
    model, _, _ = mm.build_model(name, spec)
    gen = mm.torch.Generator().manual_seed(mm.SEED + 7)
    example = [mm.make_input(shape, kind, gen) for _, shape, kind in inputs]
    outs = mm.flat_outputs(model(*example))
    # Grad mode stays on, as make_models.export_one says (torch 1.13's fused
    # inference paths do not export).
    mm.torch.onnx.export(model, tuple(example), out_onnx, opset_version=17,
                         input_names=[n for n, _, _ in inputs],
                         output_names=["output_%d" % i for i in range(len(outs))],
                         do_constant_folding=True)
    return model, inputs, example, len(outs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-mib", type=float, default=64)
    args = ap.parse_args()
    t0 = time.time()
    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    for d in ("bin", "models", "kernels", "torch", "ops"):
        os.makedirs(os.path.join(out, d))
    runner = os.path.join(out, "bin", "kiln-cuda-runner")
    shutil.copy2(args.runner, runner)
    libs = carry_libraries(args.runner, os.path.join(out, "lib"))
    sys.path.insert(0, HERE)
    import make_models as mm  # noqa: E402 (torch, onnx: Debian's)
    shutil.copy2(os.path.join(HERE, "make_models.py"), os.path.join(out, "torch"))
    tol = tolerances()
    manifest = dict(kiln=run([args.kiln, "--version"]).strip(), arch="sm_90",
                    carried_libraries=libs, models=[], kernels=[])
    saved = set()
    tmp = os.path.join(out, "tmp")
    os.makedirs(tmp)
    for entry, name, batch, flags in MODELS:
        onnx_path = os.path.join(tmp, entry + ".onnx")
        model, inputs, example, num_outputs = export(name, batch, onnx_path, mm)
        if name not in saved and name in TORCHVISION:
            with mm.torch.no_grad():
                traced = mm.torch.jit.trace(model, tuple(example))
            traced.save(os.path.join(out, "torch", name + ".ts"))
            saved.add(name)
        elif name not in saved:
            save_weights(model, os.path.join(out, "torch", name + ".pt"), mm)
            saved.add(name)
        kiln_path = os.path.join(out, "models", entry + ".kiln")
        run([args.kiln, "compile", onnx_path, "--target", "cuda", "--cuda-arch", "sm_90", "-o",
             kiln_path] + flags)
        rtol, atol = tol[name]
        manifest["models"].append(dict(
            entry=entry, model=name, batch=batch if batch is not None else
            mm.MODELS[name]["inputs"][0][1][0], artifact="models/" + entry + ".kiln",
            inputs=[dict(name=n, shape=list(s), kind=k) for n, s, k in inputs],
            outputs=num_outputs, rtol=rtol, atol=atol, flags=flags,
            torch="torchscript" if name in TORCHVISION else "weights"))
        log("%s: %s at batch %s, %d KiB" % (entry, name, manifest["models"][-1]["batch"],
                                            os.path.getsize(kiln_path) // 1024))
    for name, (text, expr) in KERNELS.items():
        kir = os.path.join(tmp, name + ".kir")
        with open(kir, "w") as f:
            f.write(text + "\n")
        run([args.kiln, "compile", kir, "--target", "cuda", "--cuda-arch", "sm_90", "-o",
             os.path.join(out, "kernels", name + ".kiln")])
        shapes = re.findall(r"%(\w+): f32\[([\d,]+)\]", text.split("->")[0])
        manifest["kernels"].append(dict(
            name=name, artifact="kernels/" + name + ".kiln", torch=expr,
            inputs=[dict(name=n, shape=[int(d) for d in s.split(",")]) for n, s in shapes]))
    manifest["ops"] = build_ops(args.kiln, out, tmp)
    log("ops: %d cases (%s)" % (len(manifest["ops"]),
                                " ".join(sorted({c["op"] for c in manifest["ops"]}))))
    shutil.rmtree(tmp)
    manifest["glibc_needed"] = glibc_needed(
        [runner] + [os.path.join(out, "lib", n) for n in libs])
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    total = sum(os.path.getsize(os.path.join(d, n)) for d, _, files in os.walk(out)
                for n in files)
    log("bundle %s: %.1f MiB (limit %.0f): %d models, %d kernels, %d op cases, runner and %s; "
        "needs glibc >= %s; built in %.0f s" % (out, total / 2**20, args.max_mib,
                                          len(manifest["models"]), len(manifest["kernels"]),
                                          len(manifest["ops"]),
                                          ", ".join(libs), manifest["glibc_needed"],
                                          time.time() - t0))
    if total > args.max_mib * 2**20:
        log("FAIL: the bundle is over %.0f MiB" % args.max_mib)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
