"""Turns the driver's raw results into bench/RESULTS.md and bench/results.png.

usage: report.py [RESULTS_JSON] [--md bench/RESULTS.md] [--png bench/results.png]

Run with Debian's /usr/bin/python3 (python3-matplotlib); the chart is
skipped, with a note, when matplotlib is missing.
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEERS = [("torch_eager", "eager"), ("torch_compile", "torch.compile"), ("ort", "ORT"),
         ("openvino", "OpenVINO")]
LABEL = dict([("kiln", "Kiln")] + PEERS)
# The fastest CPU engines: the speed targets compare Kiln with the faster of
# the two on each model (issue 16).
CPU_PEERS = ("ort", "openvino")
# Models whose recurrent layers the ORT target for RNNs covers.
RECURRENT = ("lstm", "gru", "rnn_tanh")


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt_ms(s):
    if s is None:
        return "-"
    ms = s * 1e3
    return "%.3g" % ms if ms < 100 else "%.0f" % ms


def fmt_ratio(r):
    return "-" if r is None else "%.2f" % r


def median(rec):
    st = rec.get("stats") if rec else None
    return st["median_s"] if st and st.get("n") else None


def short_error(msg, n=160):
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= n else msg[:n] + "..."


# The measurements other scripts write, named at the end of RESULTS.md.
SEE_ALSO = ("Measured apart, each by its own script: dynamic shapes (one symbolic compile or "
            "symbolic artifact against a static compile per size and ONNX Runtime, at batch 1-64 "
            "and sequence 16-512) in [DYNAMIC.md](DYNAMIC.md), `bench/dynamic.py`; start-up "
            "(cold and warm compile, artifact load, peak RSS) in [STARTUP.md](STARTUP.md), "
            "`bench/startup.py`; control flow in [CONTROL_FLOW.md](CONTROL_FLOW.md); "
            "torch.compile's backend in [TORCH_COMPILE.md](TORCH_COMPILE.md).")

class Report:
    def __init__(self, res):
        self.res = res
        self.cells = res.get("cells", [])
        self.threads = res.get("policy", {}).get("threads", sorted({c["threads"] for c in self.cells}))
        self.models = []
        for c in self.cells:
            if c["model"] not in self.models:
                self.models.append(c["model"])
        self.by = {(c["model"], c["threads"]): c for c in self.cells}
        self.lines = []
        self.notes = []  # footnotes: errors

    def w(self, s=""):
        self.lines.append(s)

    def eng(self, model, t, engine):
        c = self.by.get((model, t))
        return c["engines"].get(engine) if c else None

    def ratio(self, model, t, peer):
        k, p = median(self.eng(model, t, "kiln")), median(self.eng(model, t, peer))
        return k / p if k and p else None

    def note(self, model, t, engine, rec):
        msg = rec.get("error") or rec.get("quit_error")
        if not msg:
            return ""
        msg = short_error(msg, 400)
        where = "%s/T%d %s" % (model, t, LABEL[engine])
        for i, (places, text) in enumerate(self.notes):
            if text == msg:
                places.append(where)
                return " [%d]" % (i + 1)
        self.notes.append(([where], msg))
        return " [%d]" % len(self.notes)

    # ------------------------------------------------------------------
    def header(self):
        r = self.res
        m = r.get("machine", {})
        v = r.get("versions", {})
        p = r.get("policy", {})
        self.w("# Kiln benchmark results")
        self.w()
        self.w("Written by `scripts/bench.sh` (bench/harness/report.py from build/bench/results.json) "
               "on %s; the run took %.1f minutes." % (r.get("date", "?"), r.get("elapsed_s", 0) / 60))
        self.w("Ratios are Kiln's median time divided by the peer's: **below 1 means Kiln is faster**.")
        self.w()
        self.w("## Machine")
        self.w()
        mem = m.get("mem_total_kb")
        self.w("- CPU: %s, %s vCPUs (%s thread(s) per core, %s core(s) per socket, %s socket(s)); "
               "hypervisor: %s; AVX-512: %s, AMX: %s"
               % (m.get("lscpu_Model name", "?"), m.get("lscpu_CPU(s)", "?"),
                  m.get("lscpu_Thread(s) per core", "?"), m.get("lscpu_Core(s) per socket", "?"),
                  m.get("lscpu_Socket(s)", "?"), m.get("lscpu_Hypervisor vendor", "none"),
                  "yes" if m.get("avx512") else "no", "yes" if m.get("amx") else "no"))
        self.w("- caches: L1d %s, L2 %s, L3 %s" % (m.get("lscpu_L1d cache", "?"), m.get("lscpu_L2 cache", "?"),
                                                 m.get("lscpu_L3 cache", "?")))
        self.w("- memory: %s; kernel %s; %s" % ("%.1f GiB" % (mem / 2**20) if mem else "?",
                                             m.get("kernel", "?"), m.get("os", "?")))
        self.w("- Kiln commit %s%s; PyTorch %s, torchvision %s, ONNX Runtime %s, OpenVINO %s, onnx %s, "
               "NumPy %s (PyPI wheels in build/venv); Python %s"
               % (m.get("kiln_commit", "?"), " (with uncommitted changes)" if m.get("kiln_dirty") else "",
                  v.get("torch", "?"), v.get("torchvision", "?"), v.get("onnxruntime", "?"),
                  v.get("openvino", "?"), v.get("onnx", "?"), v.get("numpy", "?"), m.get("python", "?")))
        self.w()
        self.w("## Method")
        self.w()
        ks = sorted({c.get("runs_per_round") for c in self.cells if c.get("runs_per_round")})
        rounds = p.get("rounds", 6)
        self.w("- Every model that scripts/make_models.py exports, newest opset (op17), batch and "
               "input shapes as exported, the export's test input (test_data_set_0).")
        self.w("- Engines: Kiln (`kiln bench MODEL --data DIR --threads T --serve`), PyTorch eager "
               "(`torch.inference_mode()`), `torch.compile(model)` (Inductor, CPU, default mode), "
               "ONNX Runtime (CPUExecutionProvider, ORT_ENABLE_ALL, intra-op threads T, inter-op 1, "
               "sequential), OpenVINO (CPU plugin, the ONNX file read by its own frontend, "
               "PERFORMANCE_HINT=LATENCY, INFERENCE_NUM_THREADS=T, INFERENCE_PRECISION_HINT=f32: on "
               "CPUs with AVX-512-BF16 or AMX it otherwise computes in bf16, which is not the same "
               "computation; the precision its compiled model reports is in the accuracy table). "
               "The PyTorch model is rebuilt by scripts/make_models.py with the export's "
               "seeds; its max |error| against the export's reference outputs is in the accuracy table.")
        self.w("- Threads %s: one process per (engine, model, T), started with OMP_NUM_THREADS, "
               "MKL_NUM_THREADS and OPENBLAS_NUM_THREADS = T (PyTorch also `torch.set_num_threads(T)`, "
               "`torch.set_num_interop_threads(1)`). Workers of one (model, T) are started one after "
               "the other (compiles never overlap) and stay up side by side while timed."
               % ", ".join(str(t) for t in self.threads))
        self.w("- Timing: %d warm-up runs each, then %d rounds; in each round every engine does K runs "
               "in a row, the engine order rotated by one per round, with a %.0f ms pause after each "
               "batch (so idle OpenMP/ORT threads stop spinning). Reported: median and p10-p90 of the "
               "individual run times measured inside the worker (input binding included, process "
               "start and compile excluded)."
               % (p.get("warmup", 3), rounds, p.get("gap_ms", 20)))
        self.w("- Runs (adaptive): K is the largest value with rounds x K x (sum of the engines' "
               "per-run times) within %.0f s and within the share of the %.0f-minute budget left per "
               "(model, T) after expected startup costs, clamped to [ceil(%d/%d), ceil(%d/%d)]: every "
               "engine gets between %d and %d timed runs per (model, T); K used here: %s."
               % (p.get("cell_seconds", 6), p.get("budget_min", 19), p.get("min_runs", 30), rounds,
                  p.get("runs", 60), rounds, rounds * math.ceil(p.get("min_runs", 30) / rounds),
                  rounds * max(math.ceil(p.get("min_runs", 30) / rounds), math.ceil(p.get("runs", 60) / rounds)),
                  ", ".join(str(k) for k in ks) or "-"))
        self.w("- Timeouts: %.0f s to start (%.0f s for torch.compile and Kiln, whose compile happens "
               "then: a torch.compile past it is recorded as \"compile timeout\"), %.0f s per command. "
               "A worker that fails is recorded as an error for its cell; the others go on."
               % (p.get("startup_timeout", 0), p.get("compile_timeout", 0), p.get("run_timeout", 0)))
        env = p.get("env", {})
        self.w("- Environment: %s." % ", ".join("%s=%s" % (k, v) for k, v in env.items() if v) if any(env.values())
               else "- Environment: no OMP_PROC_BIND / KMP_AFFINITY / OMP_WAIT_POLICY set.")
        noisy = [(c["model"], c["threads"], c["other_load_cores"]) for c in self.cells
                 if (c.get("other_load_cores") or 0) > 0.25]
        loads = [c.get("other_load_cores") for c in self.cells if c.get("other_load_cores") is not None]
        if loads:
            self.w("- Other CPU load during the timed phases (busy CPU time of the machine less that of "
                   "the driver and its workers, in cores): median %.2f, max %.2f.%s"
                   % (sorted(loads)[len(loads) // 2], max(loads),
                      " **Noisy cells (> 0.25 cores):** %s." % ", ".join("%s/T%d (%.2f)" % x for x in noisy)
                      if noisy else ""))
        self.w("- Command: `%s`" % p.get("command", "?"))
        self.w()

    def speed_tables(self):
        for t in self.threads:
            self.w("## Latency at %d thread%s" % (t, "" if t == 1 else "s"))
            self.w()
            self.w("Median ms (p10-p90); ratio = Kiln / peer.")
            self.w()
            self.w("| model | Kiln ms | %s | %s | runs |" % (
                " | ".join("%s ms" % n for _, n in PEERS), " | ".join("Kiln/%s" % n for _, n in PEERS)))
            self.w("|---|---|%s%s---|" % ("---|" * len(PEERS), "---|" * len(PEERS)))
            ratios = {p: [] for p, _ in PEERS}
            for m in self.models:
                c = self.by.get((m, t))
                if not c:
                    continue
                cols = []
                for e in ["kiln"] + [p for p, _ in PEERS]:
                    rec = c["engines"].get(e)
                    if rec is None:
                        cols.append("n/a")
                        continue
                    st = rec.get("stats")
                    if st and st.get("n"):
                        cols.append("%s (%s-%s)" % (fmt_ms(st["median_s"]), fmt_ms(st["p10_s"]), fmt_ms(st["p90_s"])))
                    else:
                        cols.append("error")
                    cols[-1] += self.note(m, t, e, rec)
                rs = []
                for p, _ in PEERS:
                    r = self.ratio(m, t, p)
                    if r is not None:
                        ratios[p].append(r)
                    rs.append(("**%s**" if r is not None and r > 1 else "%s") % fmt_ratio(r))
                runs = c.get("rounds", 0) * c.get("runs_per_round", 0)
                load = c.get("other_load_cores")
                mark = " (noisy: %.2f)" % load if load is not None and load > 0.25 else ""
                self.w("| %s%s | %s | %s | %d |" % (m, mark, " | ".join(cols), " | ".join(rs), runs))
            self.w("| **geomean** | |%s %s | |" % (" |" * len(PEERS), " | ".join(
                "%s (%d)" % (fmt_ratio(geomean(ratios[p])), len(ratios[p])) for p, _ in PEERS)))
            self.w()
            self.w("Ratios > 1 (Kiln slower) in bold; geomean over the models where both engines ran "
                   "(their count in parentheses). \"noisy: x\": other processes used x cores on "
                   "average during that model's timed phase (more than 0.25).")
            self.w()

    def threads_table(self):
        self.w("## Threads really used (process CPU time / wall time over the timed runs)")
        self.w()
        self.w("Flagged with ! where cpu/wall exceeds T + 0.3. \"reports\" is the thread count the engine "
               "itself reports in its ready line.")
        self.w()
        self.w("| T | engine | reports | mean cpu/wall | max cpu/wall (model) | flagged |")
        self.w("|---|---|---|---|---|---|")
        for t in self.threads:
            for e in ["kiln"] + [p for p, _ in PEERS]:
                vals, reports, flagged = [], set(), []
                for m in self.models:
                    rec = self.eng(m, t, e)
                    if not rec:
                        continue
                    if rec.get("ready"):
                        reports.add(str(rec["ready"].get("threads")))
                    cw = (rec.get("stats") or {}).get("cpu_per_wall")
                    if cw is not None and rec["stats"].get("n"):
                        vals.append((cw, m))
                        if cw > t + 0.3:
                            flagged.append("%s %.2f" % (m, cw))
                if not vals:
                    continue
                mx = max(vals)
                self.w("| %d | %s | %s | %.2f | %.2f (%s) | %s |"
                       % (t, LABEL[e], ",".join(sorted(reports)) or "-",
                          sum(v for v, _ in vals) / len(vals), mx[0], mx[1],
                          "! " + ", ".join(flagged) if flagged else "none"))
        self.w()

    def startup_table(self):
        self.w("## Compile time and first run")
        self.w()
        self.w("Seconds, per thread count as T=%s. Kiln: compile (passes, fusion, JIT kernels, oneDNN "
               "primitives and weight packing, memory plan; not the ONNX import) then its first "
               "run; torch.compile: its first call (tracing, Inductor code generation, C++ compile "
               "and that first execution; in parentheses whether Inductor's FX graph cache missed "
               "(cold) or hit (warm), where recorded), then the second call; ORT: session creation, then the first run; "
               "OpenVINO: read_model and compile_model, then the first run; eager: the first call. "
               "\"start\" is the whole worker startup seen by the driver (process start, imports, "
               "model load, compile, first run, output check)." % "/".join(str(t) for t in self.threads))
        self.w()
        cache = self.res.get("inductor_cache_files_at_start")
        if cache is not None:
            self.w("The Inductor cache (TORCHINDUCTOR_CACHE_DIR) held %d files when this run started%s."
                   % (cache, ": every torch.compile time below is a cold compile" if cache == 0 else ""))
            self.w()
        self.w("| model | Kiln compile | Kiln first run | torch.compile first call | compile 2nd call | "
               "ORT session | ORT first run | OpenVINO compile | OpenVINO first run | eager first run | "
               "start Kiln / compile / ORT / OpenVINO / eager |")
        self.w("|---|---|---|---|---|---|---|---|---|---|---|")

        def vals(m, e, key, fmt="%.2f"):
            out = []
            for t in self.threads:
                rec = self.eng(m, t, e)
                if not rec:
                    out.append("-")
                elif key == "startup_s":
                    out.append("%.1f" % rec["startup_s"] if rec.get("startup_s") is not None and rec.get("ready") else
                               ("timeout" if "timeout" in str(rec.get("error", "")) else "err"))
                elif rec.get("ready") and rec["ready"].get(key) is not None:
                    v = rec["ready"][key]
                    s = fmt % v if isinstance(v, (int, float)) else str(v)
                    if key == "compile_s" and e == "torch_compile" and "fxgraph_cache" in rec["ready"]:
                        s += " (%s)" % rec["ready"].get("inductor_cache", "?")
                    out.append(s)
                elif rec.get("error") and "timeout" in rec["error"]:
                    out.append("timeout")
                else:
                    out.append("err" if rec.get("error") else "-")
            return " / ".join(out)

        for m in self.models:
            self.w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                m, vals(m, "kiln", "compile_s"), vals(m, "kiln", "first_run_s", "%.3f"),
                vals(m, "torch_compile", "compile_s", "%.1f"),
                vals(m, "torch_compile", "first_run_s", "%.3f"),
                vals(m, "ort", "compile_s"), vals(m, "ort", "first_run_s", "%.3f"),
                vals(m, "openvino", "compile_s"), vals(m, "openvino", "first_run_s", "%.3f"),
                vals(m, "torch_eager", "first_run_s", "%.3f"),
                "; ".join(vals(m, e, "startup_s")
                          for e in ("kiln", "torch_compile", "ort", "openvino", "torch_eager"))))
        self.w()

    def memory_table(self):
        t = self.threads[0]
        self.w("## Memory (at %d thread%s)" % (t, "" if t == 1 else "s"))
        self.w()
        self.w("Peak RSS (VmHWM at quit, MiB) of each worker process: the whole process, "
               "so the PyTorch workers carry the PyTorch library itself (the PyPI wheel, with its CUDA "
               "libraries loaded though unused). Kiln's arena: the bytes of its one activation arena, "
               "the lower bound (the largest sum of simultaneously live tensors) and the naive sum of "
               "all intermediate tensors, as Kiln reports them.")
        self.w()
        self.w("| model | Kiln | %s | Kiln arena MiB | lower bound MiB | naive MiB | arena / bound | "
               "Kiln kernels | library calls |" % " | ".join(n for _, n in PEERS))
        self.w("|---|---|%s---|---|---|---|---|---|" % ("---|" * len(PEERS)))

        def mib(b):
            return "-" if b is None else "%.2f" % (b / 2**20)

        for m in self.models:
            cols = []
            for e in ["kiln"] + [p for p, _ in PEERS]:
                rec = self.eng(m, t, e)
                kb = rec.get("peak_rss_kb") if rec else None
                cols.append("-" if kb is None else "%.0f" % (kb / 1024))
            k = (self.eng(m, t, "kiln") or {}).get("ready") or {}
            a, lb, nv = k.get("arena_bytes"), k.get("lower_bound_bytes"), k.get("naive_bytes")
            self.w("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                m, " | ".join(cols), mib(a), mib(lb), mib(nv),
                "%.3f" % (a / lb) if a is not None and lb else "-",
                k.get("kernels", "-"), k.get("library_calls", "-")))
        self.w()

    def accuracy_table(self):
        t = self.threads[0]
        self.w("## Accuracy (at %d thread%s)" % (t, "" if t == 1 else "s"))
        self.w()
        self.w("Max |output - reference| against the export's output_K.pb (PyTorch 1.13's float32 "
               "outputs); Kiln's own check verdict (its per-model tolerance).")
        self.w()
        self.w("| model | Kiln check | Kiln fallbacks | Kiln | %s | OpenVINO precision |"
               % " | ".join(n for _, n in PEERS))
        self.w("|---|---|---|---|%s---|" % ("---|" * len(PEERS)))
        for m in self.models:
            cols = []
            for e in ["kiln"] + [p for p, _ in PEERS]:
                rec = self.eng(m, t, e) or {}
                err = (rec.get("ready") or {}).get("max_abs_err")
                cols.append("-" if err is None else "%.2g" % err)
            k = (self.eng(m, t, "kiln") or {}).get("ready") or {}
            ov = (self.eng(m, t, "openvino") or {}).get("ready") or {}
            self.w("| %s | %s | %s | %s | %s |" % (m, short_error(k.get("check", "-"), 80),
                                                  k.get("fallbacks", "-"), " | ".join(cols),
                                                  ov.get("precision", "-")))
        self.w()

    def ceilings(self):
        self.w("## Machine ceilings (build/bench/kiln_ceilings)")
        self.w()
        self.w("| T | STREAM triad GB/s (3 x 128 MiB, best of 10) | oneDNN sgemm 2048^3 GFLOPS (best of 5) |")
        self.w("|---|---|---|")
        for t in self.threads:
            c = self.res.get("ceilings", {}).get(str(t), {})
            j = c.get("json")
            if j:
                self.w("| %d | %.1f | %.1f |" % (t, j["stream_triad_gbs"], j["gemm_gflops"]))
            else:
                self.w("| %d | error: %s | |" % (t, short_error(c.get("error") or c.get("stderr") or "?")))
        self.w()

    def roofline(self):
        """Per model: its work (bench/harness/work.py), Kiln's achieved rates
        against the measured ceilings, and the bound it is closest to."""
        work = self.res.get("work") or {}
        if not work:
            return
        self.w("## Roofline (Kiln)")
        self.w()
        self.w("Work from the ONNX graph (bench/harness/work.py): GFLOP counts a multiply-add as 2; "
               "MB is what any execution must move (weights, inputs, outputs; unfused: plus every "
               "intermediate written and read once). Achieved rates are that work over Kiln's median "
               "time, as a share of the ceilings above (sgemm GFLOP/s, triad GB/s). Bound: the ceiling "
               "whose time for the work, compute (GFLOP / sgemm rate) or memory (MB / triad rate), "
               "is the larger share of the measured time; *overhead* when neither reaches 10% of it. "
               "Ratios to the peers stay the headline.")
        self.w()
        self.w("| model | GFLOP | MB (unfused) | " + " | ".join(
            "T=%d GFLOP/s (%% sgemm) | T=%d GB/s (%% triad) | T=%d bound" % (t, t, t)
            for t in self.threads) + " |")
        self.w("|---|---|---|" + "---|---|---|" * len(self.threads))
        for m in self.models:
            wk = work.get(m) or {}
            if "flops" not in wk:
                continue
            gflop, mb = wk["flops"] / 1e9, wk["bytes"] / 1e6
            name = m + (" (partial: %d nodes unsized)" % wk["unsized_nodes"]
                        if wk.get("unsized_nodes") else "")
            cols = ["%.3g" % gflop, "%.3g (%.3g)" % (mb, wk["unfused_bytes"] / 1e6)]
            for t in self.threads:
                k = median(self.eng(m, t, "kiln"))
                c = (self.res.get("ceilings", {}).get(str(t), {}) or {}).get("json")
                if not k or not c:
                    cols += ["-", "-", "-"]
                    continue
                rate, bw = gflop / k, mb / 1e3 / k
                share_c, share_m = rate / c["gemm_gflops"], bw / c["stream_triad_gbs"]
                bound = ("overhead" if max(share_c, share_m) < 0.1
                         else "compute" if share_c >= share_m else "memory")
                cols += ["%.3g (%.0f%%)" % (rate, 100 * share_c), "%.3g (%.0f%%)" % (bw, 100 * share_m),
                         bound]
            self.w("| %s | %s |" % (name, " | ".join(cols)))
        self.w()

    def step_overhead_line(self):
        so = self.res.get("step_overhead")
        if not so:
            return
        self.w("## Runtime cost per step")
        self.w()
        if so.get("overhead_ns") is not None:
            self.w("`%s` (one thread, median of 300 runs): a step of an Executable costs **%.1f ns** "
                   "more than calling its kernel directly (1000 empty kernels); a model of 1000 tiny "
                   "kernels (softmax/relu/neg on f32[1,16], fusion off) runs at %s ns per step, its "
                   "computation included."
                   % (so["command"], so["overhead_ns"],
                      "%.1f" % so["tiny_kernel_ns"] if so.get("tiny_kernel_ns") else "?"))
        else:
            self.w("`%s` failed: rc %s, %s" % (so.get("command"), so.get("rc"),
                                               short_error(so.get("error") or so.get("stderr"), 300)))
        self.w()

    def pointwise_line(self):
        pb = self.res.get("pointwise_bench")
        self.w("## Pointwise model vs a hand-fused loop")
        self.w()
        if not pb:
            self.w("Not run.")
            self.w()
            return
        if pb.get("kiln_model_ms") and pb.get("hand_loop_ms"):
            self.w("`%s` (one thread): Kiln's compiled pointwise model %.3f ms, the hand-fused loop "
                   "(g++ -O3 -march=native -ffast-math) %.3f ms: ratio **%.2f** (Kiln's single JIT "
                   "kernel alone: %s ms)."
                   % (pb["command"], pb["kiln_model_ms"], pb["hand_loop_ms"],
                      pb["kiln_model_ms"] / pb["hand_loop_ms"],
                      "%.3f" % pb["kiln_kernel_ms"] if pb.get("kiln_kernel_ms") else "?"))
        else:
            self.w("`%s` failed or printed an unexpected format: rc %s, %s"
                   % (pb.get("command"), pb.get("rc"), short_error(pb.get("error") or pb.get("stderr") or pb.get("stdout"), 300)))
        self.w()

    # ------------------------------------------------------------------
    def targets(self):
        self.w("## Targets")
        self.w()
        rows = []
        # 1. faster than eager and torch.compile everywhere
        for p, name in PEERS[:2]:
            miss, n = [], 0
            for t in self.threads:
                for m in self.models:
                    r = self.ratio(m, t, p)
                    if r is None:
                        continue
                    n += 1
                    if r >= 1.0:
                        miss.append((r, m, t))
            missing = sum(1 for t in self.threads for m in self.models if self.ratio(m, t, p) is None)
            miss.sort(reverse=True)
            rows.append(("Kiln faster than %s on every model at every T" % name,
                         not miss and not missing,
                         "%d/%d cells faster%s%s" % (n - len(miss), n,
                                                    "; slower: " + ", ".join("%s/T%d %.2fx" % (m, t, r) for r, m, t in miss) if miss else "",
                                                    "; %d cells without a comparison" % missing if missing else "")))
        # 2. against the faster of ORT and OpenVINO per model (issue 16)
        for t in self.threads:
            rs = []
            for m in self.models:
                peer = [(self.ratio(m, t, p), LABEL[p]) for p in CPU_PEERS]
                peer = [(r, n) for r, n in peer if r is not None]
                if len(peer) == len(CPU_PEERS):
                    r, n = max(peer)  # Kiln / min(peers) = the largest ratio
                    rs.append((r, m, n))
            g = geomean([r for r, _, _ in rs])
            over = sorted([x for x in rs if x[0] > 1.10], reverse=True)
            rows.append(("T=%d: geomean Kiln/min(ORT, OpenVINO) <= 0.8" % t, g is not None and g <= 0.8,
                         "geomean %s over %d models%s" % (fmt_ratio(g), len(rs),
                                                          " (%.0f%% over)" % ((g / 0.8 - 1) * 100) if g and g > 0.8 else "")))
            rows.append(("T=%d: no model above 1.10x the faster of ORT and OpenVINO" % t, bool(rs) and not over,
                         ", ".join("%s %.2f (%s)" % (m, r, n) for r, m, n in over) if over
                         else "max %s" % fmt_ratio(max(rs)[0] if rs else None)))
            rec = [(self.ratio(m, t, "ort"), m) for m in self.models if m in RECURRENT]
            rec = [(r, m) for r, m in rec if r is not None]
            rows.append(("T=%d: every recurrent model <= 0.8x ORT" % t,
                         bool(rec) and all(r <= 0.8 for r, _ in rec),
                         ", ".join("%s %.2f" % (m, r) for r, m in sorted(rec, reverse=True)) or "not measured"))
        # 3. pointwise
        pb = self.res.get("pointwise_bench") or {}
        if pb.get("kiln_model_ms") and pb.get("hand_loop_ms"):
            r = pb["kiln_model_ms"] / pb["hand_loop_ms"]
            rows.append(("pointwise within 1.2x of the hand loop", r <= 1.2, "ratio %.2f" % r))
        else:
            rows.append(("pointwise within 1.2x of the hand loop", False, "not measured"))
        t1 = self.threads[0]
        r = self.ratio("pointwise", t1, "ort")
        rows.append(("pointwise >= 2.5x faster than ORT (T=%d)" % t1, r is not None and r <= 1 / 2.5,
                     "ORT/Kiln %.2fx" % (1 / r) if r else "not measured"))
        # 4. arena
        over, n = [], 0
        for m in self.models:
            k = (self.eng(m, t1, "kiln") or {}).get("ready") or {}
            a, lb = k.get("arena_bytes"), k.get("lower_bound_bytes")
            if a is None or not lb:
                continue
            n += 1
            if a / lb > 1.25:
                over.append((a / lb, m))
        over.sort(reverse=True)
        rows.append(("arena <= 1.25x lower bound", n > 0 and not over,
                     "%d/%d models%s" % (n - len(over), n, "; over: " + ", ".join("%s %.2fx" % (m, x) for x, m in over) if over else "")))
        # 5. RSS vs ORT
        over, n = [], 0
        for t in self.threads:
            for m in self.models:
                k, o = (self.eng(m, t, "kiln") or {}).get("peak_rss_kb"), (self.eng(m, t, "ort") or {}).get("peak_rss_kb")
                if k is None or o is None:
                    continue
                n += 1
                if k >= o:
                    over.append((k / o, m, t))
        over.sort(reverse=True)
        rows.append(("Kiln peak RSS below ORT's per model", n > 0 and not over,
                     "%d/%d cells%s" % (n - len(over), n, "; above: " + ", ".join("%s/T%d %.2fx" % (m, t, x) for x, m, t in over) if over else "")))
        self.w("| target | met | detail |")
        self.w("|---|---|---|")
        for name, ok, detail in rows:
            self.w("| %s | %s | %s |" % (name, "yes" if ok else "**no**", detail))
        self.w()

    def errors(self):
        if not self.notes:
            return
        self.w("## Errors")
        self.w()
        for i, (places, msg) in enumerate(self.notes, 1):
            self.w("%d. %s: %s" % (i, ", ".join(places), msg.replace("|", "\\|")))
        self.w()

    def markdown(self):
        self.header()
        self.targets()
        self.speed_tables()
        self.threads_table()
        self.startup_table()
        self.memory_table()
        self.accuracy_table()
        self.ceilings()
        self.roofline()
        self.pointwise_line()
        self.step_overhead_line()
        self.errors()
        self.w(SEE_ALSO)
        self.w()
        self.w("Chart: [results.png](results.png). Raw data: build/bench/results.json (not committed); "
               "worker logs: build/bench/logs/.")
        return "\n".join(self.lines) + "\n"

    def chart(self, path):
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            print("report: no chart (%s)" % e, file=sys.stderr)
            return False
        n = len(self.models)
        fig, axes = plt.subplots(len(self.threads), 1, figsize=(max(8, 0.55 * n + 2), 4.2 * len(self.threads)),
                                 squeeze=False)
        width = 0.8 / len(PEERS)
        colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]
        for ax, t in zip(axes[:, 0], self.threads):
            all_ys = []
            for i, (p, name) in enumerate(PEERS):
                xs, ys = [], []
                for j, m in enumerate(self.models):
                    r = self.ratio(m, t, p)
                    if r is not None:
                        xs.append(j + (i - (len(PEERS) - 1) / 2) * width)
                        ys.append(r)
                # bars grow from 1.0: down when Kiln is faster, up when slower
                ax.bar(xs, [y - 1 for y in ys], width, bottom=1.0, label="Kiln / " + name,
                       color=colors[i])
                all_ys.extend(ys)
            ax.axhline(1.0, color="black", linewidth=1)
            ax.set_yscale("log")
            lo = min(all_ys + [0.5]) / 1.3
            hi = max(all_ys + [2.0]) * 1.3
            ax.set_ylim(lo, hi)
            ticks = [v * 10 ** e for e in range(-4, 5) for v in (1, 2, 5) if lo <= v * 10 ** e <= hi]
            ax.set_yticks(ticks)
            ax.set_yticklabels(["%g" % v for v in ticks])
            ax.minorticks_off()
            ax.set_xticks(range(n))
            ax.set_xticklabels(self.models, rotation=60, ha="right", fontsize=8)
            ax.set_xlim(-0.6, n - 0.4)
            ax.set_ylabel("time ratio (log; < 1: Kiln faster)")
            ax.set_title("%d thread%s" % (t, "" if t == 1 else "s"))
            ax.grid(axis="y", alpha=0.3)
            ax.legend(fontsize=8, loc="upper left")
        fig.suptitle("Kiln median latency / peer median latency (%s)" % self.res.get("date", ""), fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?", default=os.path.join(ROOT, "build", "bench", "results.json"))
    ap.add_argument("--md", default=os.path.join(ROOT, "bench", "RESULTS.md"))
    ap.add_argument("--png", default=os.path.join(ROOT, "bench", "results.png"))
    args = ap.parse_args()
    with open(args.results) as f:
        res = json.load(f)
    rep = Report(res)
    text = rep.markdown()
    with open(args.md, "w") as f:
        f.write(text)
    drawn = rep.chart(args.png)
    print("report: wrote %s%s" % (args.md, " and " + args.png if drawn else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
