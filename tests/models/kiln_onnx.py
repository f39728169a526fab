"""Run one ONNX model with its test_data_set through `kiln` and check the outputs.

Shared by tests/models/check_model.py and tests/conformance/run_conformance.py.

The command is `kiln run MODEL.onnx --data DIR --check --rtol R --atol A`.
While a `kiln` without `--data` is in use (the importer landed before
`kiln run` learned ONNX), the same check runs in two steps instead:
`kiln import MODEL.onnx -o M.kir`, the input_K.pb / output_K.pb files turned
into .npy, and `kiln run M.kir --input NAME=F.npy ... --expect K=F.npy`.
"""
import os
import subprocess

_DATA_SUPPORT = {}


def supports_data(kiln):
    """Whether `kiln run` takes ONNX models with --data (asked once per binary)."""
    if kiln not in _DATA_SUPPORT:
        p = subprocess.run([kiln, "run", "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        _DATA_SUPPORT[kiln] = "--data" in p.stdout
    return _DATA_SUPPORT[kiln]


def _run(cmd, timeout):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + "\n(timed out after %ss)" % timeout


def quote(cmd):
    import shlex
    return " ".join(shlex.quote(c) for c in cmd)


def check(kiln, model, data_dir, rtol, atol, extra=(), scratch=None, timeout=600):
    """Returns (exit status, output text, command line as text).

    Exit status 0: every output within |got - want| <= atol + rtol * |want|.
    """
    if supports_data(kiln):
        cmd = [kiln, "run", model, "--data", data_dir, "--check",
               "--rtol", repr(rtol), "--atol", repr(atol)] + list(extra)
        rc, out = _run(cmd, timeout)
        return rc, out, quote(cmd)
    return _check_two_step(kiln, model, data_dir, rtol, atol, extra, scratch, timeout)


def _check_two_step(kiln, model, data_dir, rtol, atol, extra, scratch, timeout):
    import numpy as np
    import onnx
    from onnx import numpy_helper

    assert scratch, "the two-step check needs a scratch folder"
    os.makedirs(scratch, exist_ok=True)
    kir = os.path.join(scratch, "model.kir")
    dims = [a for a in extra]  # --dim NAME=N is the only extra argument import takes
    cmd = [kiln, "import", model, "-o", kir] + dims
    rc, out = _run(cmd, timeout)
    if rc != 0:
        return rc, out, quote(cmd)
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    run = [kiln, "run", kir]
    k = 0
    while os.path.exists(os.path.join(data_dir, "input_%d.pb" % k)):
        t = onnx.TensorProto()
        with open(os.path.join(data_dir, "input_%d.pb" % k), "rb") as f:
            t.ParseFromString(f.read())
        path = os.path.join(scratch, "input_%d.npy" % k)
        np.save(path, numpy_helper.to_array(t))
        run += ["--input", "%s=%s" % (names[k] if k < len(names) else t.name, path)]
        k += 1
    k = 0
    while os.path.exists(os.path.join(data_dir, "output_%d.pb" % k)):
        t = onnx.TensorProto()
        with open(os.path.join(data_dir, "output_%d.pb" % k), "rb") as f:
            t.ParseFromString(f.read())
        path = os.path.join(scratch, "output_%d.npy" % k)
        np.save(path, numpy_helper.to_array(t))
        run += ["--expect", "%d=%s" % (k, path)]
        k += 1
    run += ["--rtol", repr(rtol), "--atol", repr(atol), "--print-limit", "4"]
    rc, out2 = _run(run, timeout)
    return rc, out + out2, quote(cmd) + " && " + quote(run)
