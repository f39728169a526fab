"""Run one ONNX model with a test_data_set folder through `kiln` and check the outputs.

Shared by tests/models/check_model.py and tests/conformance/run_conformance.py:
the command is `kiln run MODEL.onnx --data DIR --check --rtol R --atol A`,
which reads DIR/input_K.pb, compares with DIR/output_K.pb and fails when an
element has |got - want| > atol + rtol * |want|.
"""
import json
import os
import shlex
import subprocess


def dim_flags(model_dir, data_set=0):
    """--dim SYM=N for each symbolic input dim of a zoo model, sized as in its
    test data set number `data_set` (MODEL_DIR/info.json, written by
    scripts/make_models.py)."""
    with open(os.path.join(model_dir, "info.json")) as f:
        info = json.load(f)
    axes = info.get("dynamic_axes") or {}
    inputs = info.get("inputs") or []
    shapes = (info.get("data_sets") or [[i["shape"] for i in inputs]])[data_set]
    flags = set()
    for inp, shape in zip(inputs, shapes):
        for axis, sym in (axes.get(inp["name"]) or {}).items():
            flags.add("%s=%d" % (sym, shape[int(axis)]))
    return [a for f in sorted(flags) for a in ("--dim", f)]


def supports_data(kiln):
    """Whether this `kiln run` takes ONNX test-data folders (--data)."""
    p = subprocess.run([kiln, "run", "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return "--data" in p.stdout


def quote(cmd):
    return " ".join(shlex.quote(c) for c in cmd)


def check(kiln, model, data_dir, rtol, atol, extra=(), timeout=600):
    """Returns (exit status, output text, command line as text)."""
    cmd = [kiln, "run", model, "--data", data_dir, "--check",
           "--rtol", repr(rtol), "--atol", repr(atol)] + list(extra)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=timeout)
        return p.returncode, p.stdout, quote(cmd)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + "\n(timed out after %ss)" % timeout, quote(cmd)
