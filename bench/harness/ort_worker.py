"""Benchmark worker for ONNX Runtime (CPUExecutionProvider).

usage: ort_worker.py MODEL_DIR --threads T

SessionOptions: graph_optimization_level ORT_ENABLE_ALL, intra_op_num_threads
T, inter_op_num_threads 1, execution_mode ORT_SEQUENTIAL. compile_s is the
InferenceSession construction (graph optimisation and kernel preparation);
first_run_s the first run after it. Protocol: bench/harness/common.py.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    args = common.start_onnx_worker()
    try:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        path = os.path.join(args.model_dir, "model.onnx")
        inputs, refs = common.load_data(args.model_dir)
        t0 = time.perf_counter()
        sess = ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
        t1 = time.perf_counter()
        names = [i.name for i in sess.get_inputs()]
        feeds = {n: a for n, (_, a) in zip(names, inputs)}
        t2 = time.perf_counter()
        got = sess.run(None, feeds)
        t3 = time.perf_counter()
        ready = {"event": "ready", "engine": "ort", "compile_s": t1 - t0, "first_run_s": t3 - t2,
                 "threads": sess.get_session_options().intra_op_num_threads,
                 "max_abs_err": common.max_abs_err(got, [a for _, a in refs]),
                 "providers": sess.get_providers(), "version": ort.__version__}
    except Exception as e:  # noqa: BLE001
        common.emit({"event": "error", "engine": "ort",
                     "message": "%s: %s" % (type(e).__name__, str(e)[:2000])})
        sys.exit(1)
    common.emit(ready)
    common.serve(lambda: sess.run(None, feeds))


if __name__ == "__main__":
    main()
