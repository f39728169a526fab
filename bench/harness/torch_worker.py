"""Benchmark worker for PyTorch: eager or torch.compile (Inductor, CPU).

usage: torch_worker.py --mode eager|compile MODEL_DIR --threads T

Rebuilds the zoo model with scripts/make_models.py (same seeds, so the same
weights where torchvision's initialisation has not changed since the export)
and runs it on the export's test inputs (test_data_set_0/input_K.pb) under
torch.inference_mode(); if a model fails there, under torch.no_grad(), and
then with grad mode on (the "grad_mode" field says which). max_abs_err
compares with the export's output_K.pb, which PyTorch 1.13 computed.

compile mode: compile_s is the first call of torch.compile(model) (default
backend, Inductor): tracing, code generation and that first execution, cold
or warm depending on TORCHINDUCTOR_CACHE_DIR's contents ("inductor_cache":
"cold" when Inductor's FX graph cache missed, "warm" when it hit). first_run_s is the call
after it. eager mode: compile_s is 0 and first_run_s the first call.
Protocol: bench/harness/common.py.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["eager", "compile"], required=True)
    ap.add_argument("model_dir")
    ap.add_argument("--threads", type=int, required=True)
    args = ap.parse_args()
    common.protocol_stdout()
    common.set_thread_env(args.threads)
    engine = "torch_" + args.mode
    try:
        cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        cache_nonempty = bool(cache_dir and os.path.isdir(cache_dir) and os.listdir(cache_dir))
        import torch

        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        sys.path.insert(0, os.path.join(root, "scripts"))
        import make_models  # sets torch threads from OMP_NUM_THREADS, which is T

        torch.set_num_threads(args.threads)
        name = common.model_name(args.model_dir)
        model, _, _ = make_models.build_model(name, make_models.MODELS[name])
        inputs, refs = common.load_data(args.model_dir)
        xs = [torch.from_numpy(a.copy()) for _, a in inputs]
        fn = torch.compile(model) if args.mode == "compile" else model

        modes = [("inference_mode", torch.inference_mode), ("no_grad", torch.no_grad),
                 ("grad", torch.enable_grad)]
        failures = []
        for grad_mode, ctx in modes:
            try:
                with ctx():
                    t0 = time.perf_counter()
                    out = fn(*xs)
                    t1 = time.perf_counter()
                    if args.mode == "compile":
                        out = fn(*xs)
                    t2 = time.perf_counter()
                break
            except Exception as e:  # noqa: BLE001 - try the next grad mode
                failures.append("%s: %s: %s" % (grad_mode, type(e).__name__, str(e)[:300]))
                if args.mode == "compile":
                    torch._dynamo.reset()
                    fn = torch.compile(model)
        else:
            raise RuntimeError("; ".join(failures))
        if args.mode == "compile":
            compile_s, first_run_s = t1 - t0, t2 - t1
        else:
            compile_s, first_run_s = 0.0, t1 - t0
        got = [o.detach().numpy() for o in make_models.flat_outputs(out)]
        ready = {"event": "ready", "engine": engine, "compile_s": compile_s,
                 "first_run_s": first_run_s, "threads": torch.get_num_threads(),
                 "interop_threads": torch.get_num_interop_threads(),
                 "max_abs_err": common.max_abs_err(got, [a for _, a in refs]),
                 "grad_mode": grad_mode, "version": torch.__version__}
        if failures:
            ready["fallback_reason"] = failures
        if args.mode == "compile":
            # Inductor's FX graph cache: hits mean the compiled code came from
            # TORCHINDUCTOR_CACHE_DIR (a warm compile), misses a cold one.
            try:
                from torch._dynamo.utils import counters
                hits = int(counters["inductor"].get("fxgraph_cache_hit", 0))
                misses = int(counters["inductor"].get("fxgraph_cache_miss", 0))
                ready["fxgraph_cache"] = {"hits": hits, "misses": misses}
                ready["inductor_cache"] = ("warm" if hits and not misses else
                                           "cold" if misses and not hits else
                                           "%d hits, %d misses" % (hits, misses))
            except Exception as e:  # noqa: BLE001 - the counters are internal API
                ready["inductor_cache"] = "unknown (%s)" % type(e).__name__
            ready["inductor_cache_dir_was_empty"] = not cache_nonempty
    except Exception as e:  # noqa: BLE001 - report, do not crash silently
        common.emit({"event": "error", "engine": engine,
                     "message": "%s: %s" % (type(e).__name__, str(e)[:2000])})
        sys.exit(1)
    common.emit(ready)

    # One grad-mode context around the whole loop (the mode is thread-local and
    # the loop runs on this thread), so no per-call context cost is timed.
    with dict(modes)[grad_mode]():
        common.serve(lambda: fn(*xs))


if __name__ == "__main__":
    main()
