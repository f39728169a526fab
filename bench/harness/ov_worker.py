"""Benchmark worker for OpenVINO (CPU plugin).

usage: ov_worker.py MODEL_DIR --threads T

The ONNX model is read by OpenVINO's own frontend (core.read_model) and
compiled for the CPU device with PERFORMANCE_HINT=LATENCY,
INFERENCE_NUM_THREADS=T and INFERENCE_PRECISION_HINT=f32: on CPUs with
AVX-512-BF16 or AMX OpenVINO otherwise computes in bf16, which is not the
computation the other engines do (the ready line reports the precision the
compiled model uses). compile_s is read_model plus compile_model; first_run_s
the first inference after it, through one InferRequest that every run
reuses. Protocol: bench/harness/common.py.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    args = common.start_onnx_worker()
    try:
        import openvino as ov

        path = os.path.join(args.model_dir, "model.onnx")
        inputs, refs = common.load_data(args.model_dir)
        core = ov.Core()
        t0 = time.perf_counter()
        model = core.read_model(path)
        compiled = core.compile_model(model, "CPU", {
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_NUM_THREADS": args.threads,
            "INFERENCE_PRECISION_HINT": "f32",
        })
        t1 = time.perf_counter()
        request = compiled.create_infer_request()
        names = [i.get_any_name() for i in compiled.inputs]
        by_name = {n: a for n, a in inputs}
        # The export's input names; positional when a name differs.
        feeds = [by_name.get(n, inputs[k][1]) for k, n in enumerate(names)]

        def run_once():
            request.infer(feeds)
            return [request.get_output_tensor(k).data for k in range(len(compiled.outputs))]

        t2 = time.perf_counter()
        got = [g.copy() for g in run_once()]
        t3 = time.perf_counter()
        ready = {"event": "ready", "engine": "openvino", "compile_s": t1 - t0,
                 "first_run_s": t3 - t2,
                 "threads": int(compiled.get_property("INFERENCE_NUM_THREADS")),
                 "precision": compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name(),
                 "max_abs_err": common.max_abs_err(got, [a for _, a in refs]),
                 "version": ov.__version__}
    except Exception as e:  # noqa: BLE001
        common.emit({"event": "error", "engine": "openvino",
                     "message": "%s: %s" % (type(e).__name__, str(e)[:2000])})
        sys.exit(1)
    common.emit(ready)
    common.serve(lambda: request.infer(feeds))


if __name__ == "__main__":
    main()
