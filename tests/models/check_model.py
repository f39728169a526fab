#!/usr/bin/env python3
"""One model-zoo test: run an exported model through kiln and compare with PyTorch.

usage: check_model.py KILN MODEL_DIR RTOL ATOL [--expect-fail] [EXTRA_KILN_ARG ...]

MODEL_DIR is OUT_DIR/<name>-op<N> as written by scripts/make_models.py. Runs
`kiln run MODEL_DIR/model.onnx --data MODEL_DIR/test_data_set_K --check
--rtol RTOL --atol ATOL` for every data set K (a dynamic model has one per
size), prints the commands and kiln's reports, and exits 1 unless every output is within tolerance. With --compile
it also requires the memory plan (checked by the compiler itself, see
Executable::checkMemory) to be within 1.25x of its lower bound, the
largest live set. With --artifact it compiles the model with `kiln compile
-o` into a temporary `.kiln` artifact (symbolic dims bound to the test
set's sizes from MODEL_DIR/info.json) and runs that instead, per set. With
--symbolic-artifact it compiles the model once with `kiln compile -o` and
no --dim (a symbolic artifact over the default ranges, Note [Symbolic
artifacts] in codegen/SymbolicArtifact.cpp) and runs every set on that one
file, each size compiled from it (memory plan checked as with --compile). With
--expect-fail (an "xfail" line of tests/models/tolerances) it exits 1 when kiln
passes instead, so that a stale mark is noticed. A missing model or data set
is an error, never a skip.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

ARENA_LIMIT = 1.25  # arena / lower bound (issue 5)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln_onnx  # noqa: E402

# Every test compiles (the compile cache's own tests are in tests/lit/tools/cache).
os.environ["KILN_CACHE"] = "off"


def compile_artifact(kiln, model, model_dir, data_set, extra, path):
    """kiln compile MODEL -o PATH; (exit status, output, command)."""
    cmd = [kiln, "compile", model, "-o", path] + kiln_onnx.dim_flags(model_dir, data_set) + extra
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace", timeout=600)
    return p.returncode, p.stdout, kiln_onnx.quote(cmd)


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    kiln, model_dir, rtol, atol = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    extra = sys.argv[5:]
    expect_fail = "--expect-fail" in extra
    artifact = "--artifact" in extra
    symbolic = "--symbolic-artifact" in extra
    extra = [a for a in extra if a not in ("--expect-fail", "--artifact", "--symbolic-artifact")]
    threads = [a for i, a in enumerate(extra)
               if a == "--threads" or (i > 0 and extra[i - 1] == "--threads")]
    model = os.path.join(model_dir, "model.onnx")
    data = os.path.join(model_dir, "test_data_set_0")
    missing = [p for p in (model, os.path.join(data, "input_0.pb"), os.path.join(data, "output_0.pb"))
               if not os.path.exists(p)]
    if missing:
        print("check_model.py: error: missing %s\n  the zoo's fixture (scripts/make_models.py)"
              " should have written it; run `ctest -R 'models-.*generate'` or\n"
              "  scripts/make_models.py %s --only %s (with --exporter dynamo and the venv's"
              " python for zoo-dynamo)"
              % (", ".join(missing), os.path.dirname(model_dir),
                 os.path.basename(model_dir).rsplit("-op", 1)[0]))
        return 1
    t0 = time.time()
    # Every data set (a dynamic model has one per size), until one fails.
    data_sets = sorted((d for d in os.listdir(model_dir) if d.startswith("test_data_set_")),
                       key=lambda d: int(d.rsplit("_", 1)[1]))
    rc = 0
    keep = tempfile.TemporaryDirectory()
    symbolic_path = os.path.join(keep.name, "symbolic.kiln")
    if symbolic:
        cmd = [kiln, "compile", model, "-o", symbolic_path] + extra
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=600)
        print("$ " + kiln_onnx.quote(cmd))
        print(p.stdout.rstrip())
        rc = p.returncode
        data_sets = data_sets if rc == 0 else []
    for n, name in enumerate(data_sets):
        data = os.path.join(model_dir, name)
        if symbolic:
            rc, out, cmd = kiln_onnx.check(kiln, symbolic_path, data, rtol, atol, threads)
            print("$ " + cmd)
            print(out.rstrip())
            # Where the artifact holds every kernel, no size compiles one.
            m = re.search(r"compile: (\d+) kernels?(?: \((\d+) with run-time sizes\))?", out)
            if rc == 0 and ", 0 per size" in p.stdout and (
                    not m or int(m.group(1)) != int(m.group(2) or 0)):
                print("check_model.py: FAIL: a kernel was compiled for this size, though the "
                      "symbolic artifact holds them all")
                return 1
        elif artifact:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "model.kiln")
                rc, out, cmd = compile_artifact(kiln, model, model_dir, n, extra, path)
                print("$ " + cmd)
                print(out.rstrip())
                if rc == 0:
                    rc, out, cmd = kiln_onnx.check(kiln, path, data, rtol, atol, threads)
                    print("$ " + cmd)
                    print(out.rstrip())
        else:
            rc, out, cmd = kiln_onnx.check(kiln, model, data, rtol, atol, extra)
            print("$ " + cmd)
            print(out.rstrip())
        if ("--compile" in extra or symbolic) and rc == 0:
            m = re.search(r"arena / lower bound = ([0-9.]+)", out)
            if not m:
                print("check_model.py: FAIL: no memory plan line in kiln's output")
                return 1
            if float(m.group(1)) > ARENA_LIMIT:
                print("check_model.py: FAIL: arena is %s x the lower bound (limit %.2f)"
                      % (m.group(1), ARENA_LIMIT))
                return 1
        if rc != 0:
            break
    keep.cleanup()
    took = time.time() - t0
    if expect_fail:
        if rc == 0:
            print("check_model.py: UNEXPECTED PASS in %.1fs: drop 'xfail' from tests/models/tolerances"
                  % took)
            return 1
        print("check_model.py: expected failure in %.1fs (exit %d)" % (took, rc))
        return 0
    print("check_model.py: %s in %.1fs (exit %d)" % ("PASS" if rc == 0 else "FAIL", took, rc))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
