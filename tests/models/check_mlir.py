#!/usr/bin/env python3
"""check_mlir.py KILN MLIR_OPT MODEL_DIR: the model's graph written as MLIR
(`kiln translate --emit=mlir`, which also parses its text back in process)
verifies in mlir-opt-16 with no diagnostic (--verify-diagnostics), and its
function takes the model's inputs and returns its outputs (one tensor each,
in order, of the model's element types)."""
import re
import subprocess
import sys
import tempfile

import onnx

kiln, mlir_opt, model_dir = sys.argv[1:4]
model = onnx.load(model_dir + "/model.onnx", load_external_data=False)
init = {i.name for i in model.graph.initializer}
inputs = [i for i in model.graph.input if i.name not in init]
outputs = list(model.graph.output)
ELEM = {1: "f32", 10: "f16", 16: "bf16", 11: "f64", 2: "i8", 3: "i8", 4: "i16", 5: "i16",
        6: "i32", 12: "i32", 7: "i64", 9: "i1"}

with tempfile.TemporaryDirectory() as tmp:
    out = tmp + "/model.mlir"
    r = subprocess.run([kiln, "translate", model_dir + "/model.onnx", "-o", out],
                       capture_output=True, text=True)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        sys.exit("FAIL: kiln translate exited %d" % r.returncode)
    v = subprocess.run([mlir_opt, "--verify-diagnostics", out, "-o", "/dev/null"],
                       capture_output=True, text=True)
    if v.returncode != 0:
        sys.exit("FAIL: mlir-opt-16 rejects the module:\n" + v.stderr[:4000])
    text = open(out).read()

head = re.search(r"^  func\.func @\S+\((.*)\) -> (.*) \{$", text, re.M)
if not head:
    sys.exit("FAIL: no public func.func in the module")
args = re.findall(r"%arg\d+: tensor<([^>]*)>", head.group(1))
results = re.findall(r"tensor<([^>]*)>", head.group(2))


def elem(t):
    return t.split("x")[-1]


def want(vs):
    return [ELEM.get(v.type.tensor_type.elem_type, "?") for v in vs]


if [elem(a) for a in args] != want(inputs):
    sys.exit("FAIL: arguments %s, the model's inputs %s" % (args, want(inputs)))
if [elem(t) for t in results] != want(outputs):
    sys.exit("FAIL: results %s, the model's outputs %s" % (results, want(outputs)))
calls = sorted(set(re.findall(r"func\.call @kiln\.([a-z_]+)", text)))
print("OK: %d arguments, %d results, %d linalg ops, calls: %s" %
      (len(args), len(results), len(re.findall(r"= linalg\.", text)), ", ".join(calls) or "none"))
