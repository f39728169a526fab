"""What the benchmark workers share: the line protocol, test data, error checks.

A worker is one process per (engine, model, thread count). It speaks JSON
lines on stdout; anything else it (or a library) prints must go to stderr,
so `protocol_stdout()` moves the real stdout out of the way before heavy
imports: file descriptor 1 then points at stderr, and only `emit` writes to
the saved descriptor.

    on start:   {"event":"ready", "engine", "compile_s", "first_run_s",
                 "threads", "max_abs_err", ...}
    warmup N -> {"event":"warmup","n":N}
    run N    -> {"event":"run","times":[s...],"cpu_s","wall_s"}
    quit     -> {"event":"quit","peak_rss_kb"} and exit 0
A failure before ready is reported as {"event":"error","message"} and exit 1.
"""
import json
import os
import resource
import sys
import time

_out = None


def protocol_stdout():
    """Keep the real stdout for protocol lines; send fd 1 (C libraries too) to stderr."""
    global _out
    if _out is None:
        fd = os.dup(1)
        os.dup2(2, 1)
        _out = os.fdopen(fd, "w", buffering=1)
        sys.stdout = sys.stderr
    return _out


def emit(obj):
    protocol_stdout().write(json.dumps(obj) + "\n")
    protocol_stdout().flush()


def start_onnx_worker():
    """Parses `MODEL_DIR --threads T` (the ONNX engines' command line), moves
    stdout aside for the protocol and sets the thread variables; returns the
    arguments."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--threads", type=int, required=True)
    args = ap.parse_args()
    protocol_stdout()
    set_thread_env(args.threads)
    return args


def set_thread_env(threads):
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)


def peak_rss_kb():
    """This process's peak RSS: VmHWM of /proc/self/status. Not ru_maxrss:
    Linux carries the parent's peak over fork and exec into it, so a worker
    started by a large driver would report the driver's size."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def model_name(model_dir):
    base = os.path.basename(os.path.normpath(model_dir))
    name, sep, opset = base.rpartition("-op")
    return name if sep and opset.isdigit() else base


def load_data(model_dir):
    """(inputs, outputs) as lists of (name, numpy array) from test_data_set_0."""
    from onnx import TensorProto, numpy_helper

    data = os.path.join(model_dir, "test_data_set_0")

    def read(prefix):
        res = []
        k = 0
        while os.path.exists(os.path.join(data, "%s_%d.pb" % (prefix, k))):
            t = TensorProto()
            with open(os.path.join(data, "%s_%d.pb" % (prefix, k)), "rb") as f:
                t.ParseFromString(f.read())
            res.append((t.name, numpy_helper.to_array(t)))
            k += 1
        return res

    return read("input"), read("output")


def max_abs_err(got, want):
    """Largest |got - want| over all outputs (None when some output cannot be compared)."""
    import numpy as np

    if len(got) != len(want):
        return None
    worst = 0.0
    for g, w in zip(got, want):
        g = np.asarray(g)
        if g.shape != w.shape:
            return None
        if g.size == 0:
            continue
        d = np.abs(g.astype(np.float64) - w.astype(np.float64))
        worst = max(worst, float(np.nanmax(d)) if not np.isnan(d).all() else float("nan"))
    return worst


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def serve(run_once):
    """The command loop after ready: run_once() performs one inference."""
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        cmd = words[0]
        if cmd == "warmup":
            n = int(words[1])
            for _ in range(n):
                run_once()
            emit({"event": "warmup", "n": n})
        elif cmd == "run":
            n = int(words[1])
            times = []
            c0, w0 = cpu_seconds(), time.perf_counter()
            for _ in range(n):
                t0 = time.perf_counter()
                run_once()
                times.append(time.perf_counter() - t0)
            w1, c1 = time.perf_counter(), cpu_seconds()
            emit({"event": "run", "times": times, "cpu_s": c1 - c0, "wall_s": w1 - w0})
        elif cmd == "quit":
            emit({"event": "quit", "peak_rss_kb": peak_rss_kb()})
            return
        else:
            emit({"event": "error", "message": "unknown command %r" % cmd})
