"""Runs the benchmark: Kiln vs PyTorch eager, torch.compile, ONNX Runtime and OpenVINO.

usage: driver.py [--models a,b] [--threads 1,2] [--runs N] [--engines ...] [...]

Standard library only (it runs under the bench venv's python, which it also
uses to start the Python workers). For each model (the newest opset export
of each zoo model) and each thread count T:

  1. start one worker process per engine, one after the other (so that no
     compile competes with another for the cores), with OMP_NUM_THREADS,
     MKL_NUM_THREADS and OPENBLAS_NUM_THREADS set to T, and wait for its
     "ready" line (a startup timeout; torch.compile and Kiln get the longer
     compile timeout);
  2. warm each up (--warmup runs), which also measures its per-run time;
  3. time them interleaved: --rounds rounds, each round giving every engine
     K runs in a row, the engine order rotated by one per round;
     K is chosen per (model, T) (see choose_runs: the adaptive policy);
  4. quit them all (peak RSS).

A worker that crashes, prints something that is not a JSON line, reports an
error or times out is recorded as an error for its cell and killed; the
bench goes on. The protocol is in bench/harness/common.py. Raw results go
to --out (JSON); bench/harness/report.py turns them into bench/RESULTS.md.
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import selectors
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ENGINES = ["kiln", "torch_eager", "torch_compile", "ort", "openvino"]


def log(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


class WorkerError(Exception):
    pass


class Worker:
    """One engine process speaking the JSON line protocol."""

    def __init__(self, engine, cmd, env, log_path):
        self.engine = engine
        self.cmd = cmd
        self.log_path = log_path
        self.buf = b""
        self.errlog = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.errlog, env=env, cwd=ROOT,
                                     start_new_session=True)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)

    def stderr_tail(self, n=400):
        """The start and the end of the worker's stderr (the first error and the last words)."""
        try:
            self.errlog.flush()
            with open(self.log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return text if len(text) <= 2 * n else text[:n] + " [...] " + text[-n:]

    def send(self, line):
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise WorkerError("cannot send %r: %s; stderr: %s" % (line, e, self.stderr_tail()))

    def read_event(self, timeout, expect):
        """The next protocol line, parsed; WorkerError on timeout, EOF, non-JSON, error event."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerError("timeout after %.0f s waiting for '%s'" % (timeout, expect))
            if not self.sel.select(left):
                continue
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                code = self.proc.wait(timeout=10)
                raise WorkerError("exited with status %s before '%s'; stderr: %s"
                                  % (code, expect, self.stderr_tail()))
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        text = line.decode("utf-8", "replace").strip()
        try:
            ev = json.loads(text)
        except ValueError:
            raise WorkerError("not a JSON line while waiting for '%s': %r" % (expect, text[:300]))
        if not isinstance(ev, dict):
            raise WorkerError("not a JSON object: %r" % text[:300])
        if ev.get("event") == "error":
            raise WorkerError("error: %s; stderr: %s" % (ev.get("message"), self.stderr_tail()))
        if ev.get("event") != expect:
            raise WorkerError("expected event '%s', got %r" % (expect, text[:300]))
        return ev

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.close()

    def close(self):
        try:
            self.sel.close()
        except Exception:  # noqa: BLE001
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass
        self.errlog.close()


def busy_seconds():
    """CPU seconds all processes have spent busy since boot (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        hz = os.sysconf("SC_CLK_TCK")
        return (sum(v[:8]) - v[3] - v[4]) / hz  # minus idle and iowait
    except (OSError, ValueError, IndexError):
        return None


def proc_cpu_seconds(pid):
    """User + system CPU seconds of process pid, all its threads (/proc/PID/stat), or 0."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def percentile(sorted_xs, q):
    if not sorted_xs:
        return None
    pos = (len(sorted_xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summarize(times, cpu_s, wall_s):
    xs = sorted(times)
    return dict(n=len(xs), median_s=percentile(xs, 0.5), p10_s=percentile(xs, 0.1),
                p90_s=percentile(xs, 0.9), min_s=xs[0] if xs else None,
                mean_s=sum(xs) / len(xs) if xs else None,
                cpu_s=cpu_s, wall_s=wall_s, cpu_per_wall=cpu_s / wall_s if wall_s else None)


def zoo_models(zoo):
    """name -> newest-opset export folder."""
    best = {}
    for d in sorted(os.listdir(zoo)):
        m = re.fullmatch(r"(.+)-op(\d+)", d)
        if not m or not os.path.exists(os.path.join(zoo, d, "model.onnx")):
            continue
        name, op = m.group(1), int(m.group(2))
        if name not in best or op > best[name][0]:
            best[name] = (op, os.path.join(zoo, d))
    return {n: p for n, (_, p) in best.items()}


def model_order(names):
    """make_models.py's order (its MODELS dict), read without importing torch."""
    try:
        with open(os.path.join(ROOT, "scripts", "make_models.py")) as f:
            src = f.read()
        body = src[src.index("MODELS = {"):]
        order = re.findall(r'^\s+"(\w+)": dict\(', body, re.M)
    except (OSError, ValueError):
        order = []
    rank = {n: i for i, n in enumerate(order)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def worker_cmd(engine, model_dir, threads, args):
    py = args.python
    if engine == "kiln":
        return [args.kiln, "bench", os.path.join(model_dir, "model.onnx"), "--data",
                os.path.join(model_dir, "test_data_set_0"), "--threads", str(threads), "--serve",
                "--no-cache"]  # compile_s is a cold compile (bench/startup.py times warm ones)
    if engine == "torch_eager":
        return [py, os.path.join(HERE, "torch_worker.py"), "--mode", "eager", model_dir,
                "--threads", str(threads)]
    if engine == "torch_compile":
        return [py, os.path.join(HERE, "torch_worker.py"), "--mode", "compile", model_dir,
                "--threads", str(threads)]
    if engine == "ort":
        return [py, os.path.join(HERE, "ort_worker.py"), model_dir, "--threads", str(threads)]
    if engine == "openvino":
        return [py, os.path.join(HERE, "ov_worker.py"), model_dir, "--threads", str(threads)]
    raise ValueError(engine)


def choose_runs(per_run_s, args, timed_share_s):
    """Runs per engine per round (K) for one (model, T).

    Policy: every engine gets --rounds x K timed runs with K between
    ceil(--min-runs / rounds) and ceil(--runs / rounds). K is the largest
    value whose timed phase (rounds x K x the sum of the engines' warm-up
    per-run times) fits in --cell-seconds and in timed_share_s: the time
    left in the budget, less the expected startup cost of the cells still
    to run, divided among them.
    """
    k_min = math.ceil(args.min_runs / args.rounds)
    k_max = max(k_min, math.ceil(args.runs / args.rounds))
    per_round = sum(per_run_s) or 1e-9
    cap = args.cell_seconds
    if timed_share_s is not None:
        cap = min(cap, max(0.0, timed_share_s))
    k = int(cap / (args.rounds * per_round))
    return max(k_min, min(k_max, k))


def run_cell(model, model_dir, threads, args, log_dir, timed_share_s):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    cell = dict(model=model, model_dir=os.path.relpath(model_dir, ROOT), threads=threads,
                engines={})
    workers = {}
    for engine in args.engines:
        rec = cell["engines"].setdefault(engine, {})
        cmd = worker_cmd(engine, model_dir, threads, args)
        rec["command"] = " ".join(shlex.quote(c) for c in cmd)
        if engine == "kiln" and not os.access(args.kiln, os.X_OK):
            rec["error"] = "%s not found" % args.kiln
            continue
        timeout = args.compile_timeout if engine in ("torch_compile", "kiln") else args.startup_timeout
        t0 = time.monotonic()
        w = Worker(engine, cmd, env, os.path.join(log_dir, "%s-T%d-%s.log" % (model, threads, engine)))
        try:
            ready = w.read_event(timeout, "ready")
            rec["ready"] = ready
            rec["startup_s"] = time.monotonic() - t0
            workers[engine] = w
            log("%s T=%d %s ready in %.1f s (compile %.2f s)"
                % (model, threads, engine, rec["startup_s"], ready.get("compile_s") or 0))
        except WorkerError as e:
            msg = str(e)
            if msg.startswith("timeout") and engine == "torch_compile":
                msg = "compile timeout (%.0f s): %s" % (timeout, msg)
            rec["error"] = msg
            rec["startup_s"] = time.monotonic() - t0
            log("%s T=%d %s FAILED: %s" % (model, threads, engine, msg[:300]))
            w.kill()

    def fail(engine, e):
        cell["engines"][engine]["error"] = str(e)
        log("%s T=%d %s FAILED: %s" % (model, threads, engine, str(e)[:300]))
        workers.pop(engine).kill()

    per_run = {}
    for engine in list(workers):
        w = workers[engine]
        try:
            t0 = time.monotonic()
            w.send("warmup %d" % args.warmup)
            w.read_event(args.run_timeout, "warmup")
            per_run[engine] = (time.monotonic() - t0) / max(1, args.warmup)
        except WorkerError as e:
            fail(engine, e)

    k = choose_runs([per_run[e] for e in workers], args, timed_share_s)
    cell["runs_per_round"] = k
    cell["rounds"] = args.rounds
    samples = {e: dict(times=[], cpu_s=0.0, wall_s=0.0) for e in workers}
    order = list(workers)
    pids = [w.proc.pid for w in workers.values()]
    ours0 = sum(proc_cpu_seconds(p) for p in pids) + proc_cpu_seconds(os.getpid())
    busy0, wall0 = busy_seconds(), time.monotonic()
    for r in range(args.rounds):
        rot = order[r % len(order):] + order[:r % len(order)] if order else []
        for engine in rot:
            if engine not in workers:
                continue
            w = workers[engine]
            try:
                w.send("run %d" % k)
                ev = w.read_event(max(args.run_timeout, 20 * k * per_run[engine]), "run")
                times = ev.get("times")
                if not isinstance(times, list) or len(times) != k:
                    raise WorkerError("run event with %s times, expected %d"
                                      % (len(times) if isinstance(times, list) else "no", k))
                s = samples[engine]
                s["times"].extend(float(t) for t in times)
                s["cpu_s"] += float(ev.get("cpu_s") or 0.0)
                s["wall_s"] += float(ev.get("wall_s") or 0.0)
            except (WorkerError, TypeError, ValueError) as e:
                fail(engine, e)
            # Let the engine's idle threads (OpenMP, ORT's pool) stop spinning
            # before the next engine starts.
            time.sleep(args.gap_ms / 1e3)
    busy1, wall1 = busy_seconds(), time.monotonic()
    ours1 = sum(proc_cpu_seconds(p) for p in pids) + proc_cpu_seconds(os.getpid())
    if busy0 is not None and busy1 is not None and wall1 > wall0:
        timed_cpu = sum(s["cpu_s"] for s in samples.values())
        timed = sum(s["wall_s"] for s in samples.values())
        span = wall1 - wall0
        cell["timed_phase_s"] = span
        cell["timed_fraction"] = timed / span
        # In cores, averaged over the timed phase: CPU used by processes other
        # than the driver and its workers (another build, say), and CPU the
        # workers and driver used outside the timed runs (spinning threads,
        # protocol handling). A worker killed mid-phase is not counted.
        cell["other_load_cores"] = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / span
        cell["harness_load_cores"] = max(0.0, (ours1 - ours0) - timed_cpu) / span
    try:
        cell["loadavg"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    for engine, w in list(workers.items()):
        rec = cell["engines"][engine]
        s = samples[engine]
        rec["times"] = s["times"]
        rec["stats"] = summarize(s["times"], s["cpu_s"], s["wall_s"])
        try:
            w.send("quit")
            ev = w.read_event(30, "quit")
            rec["peak_rss_kb"] = ev.get("peak_rss_kb")
            try:
                code = w.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                code = "did not exit"
            if code != 0:
                rec["exit_error"] = "exit status %s after quit" % code
            w.kill()
        except WorkerError as e:
            rec["quit_error"] = str(e)
            w.kill()
    for engine, rec in cell["engines"].items():
        st = rec.get("stats")
        if st and st["n"]:
            log("%s T=%d %-13s median %.3f ms (p10 %.3f, p90 %.3f, n=%d, cpu/wall %.2f)"
                % (model, threads, engine, st["median_s"] * 1e3, st["p10_s"] * 1e3,
                   st["p90_s"] * 1e3, st["n"], st["cpu_per_wall"] or 0))
    return cell


def run_text(cmd, timeout, env=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
        return dict(command=" ".join(shlex.quote(c) for c in cmd), rc=p.returncode,
                    stdout=p.stdout, stderr=p.stderr[-2000:])
    except (OSError, subprocess.TimeoutExpired) as e:
        return dict(command=" ".join(shlex.quote(c) for c in cmd), rc=None, error=str(e))


def pointwise(args):
    model = os.path.join(args.zoo, "pointwise-op17", "model.onnx")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    res = run_text([args.pointwise_bench, "30", model], 300, env)
    out = res.get("stdout") or ""
    m = re.search(r"^compiled model .*: compile ([\d.]+) ms, ([\d.]+) ms median", out, re.M)
    if m:
        res["kiln_compile_ms"] = float(m.group(1))
        res["kiln_model_ms"] = float(m.group(2))
    m = re.search(r"^kiln jit:\s+([\d.]+) ms median", out, re.M)
    if m:
        res["kiln_kernel_ms"] = float(m.group(1))
    m = re.search(r"^g\+\+ .*?: ([\d.]+) ms median", out, re.M)
    if m:
        res["hand_loop_ms"] = float(m.group(1))
    return res


def step_overhead(args):
    """The runtime's cost per step (build/bench/kiln_step_overhead)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = run_text([args.step_overhead, "1000", "300"], 300, env)
    out = res.get("stdout") or ""
    m = re.search(r"runtime overhead\s+([\d.]+) ns per step", out)
    if m:
        res["overhead_ns"] = float(m.group(1))
    m = re.search(r"unfused: (\d+) steps\s+([\d.]+) ns per step", out)
    if m:
        res["tiny_kernel_ns"] = float(m.group(2))
    return res


def ceilings(args, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    res = run_text([args.ceilings, str(threads)], 300, env)
    try:
        res["json"] = json.loads(res.get("stdout") or "")
    except ValueError:
        pass
    return res


def machine_info():
    info = dict(platform=platform.platform(), kernel=platform.release(), python=platform.python_version())
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k in ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket",
                     "Socket(s)", "L1d cache", "L2 cache", "L3 cache", "Hypervisor vendor",
                     "Architecture"):
                info["lscpu_" + k] = v
            if k == "Flags":
                info["avx512"] = "avx512f" in v.split()
                info["amx"] = "amx_tile" in v.split()
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    info["mem_total_kb"] = int(line.split()[1])
    except OSError:
        pass
    try:
        info["os"] = dict(l.rstrip("\n").split("=", 1) for l in open("/etc/os-release") if "=" in l) \
            .get("PRETTY_NAME", "").strip('"')
    except OSError:
        pass
    git = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    info["kiln_commit"] = git.stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, cwd=ROOT)
    info["kiln_dirty"] = bool(dirty.stdout.strip())
    return info


def python_versions(py):
    code = ("import json, importlib.metadata as m\n"
            "print(json.dumps({p: m.version(p) for p in "
            "['torch','torchvision','onnxruntime','openvino','onnx','numpy']}))")
    try:
        return json.loads(subprocess.run([py, "-c", code], capture_output=True, text=True,
                                         timeout=60).stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", default=os.path.join(ROOT, "build", "tests", "models", "zoo"))
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--runs", type=int, default=60, help="timed runs per engine for fast models")
    ap.add_argument("--min-runs", type=int, default=30, help="timed runs per engine, at least")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--gap-ms", type=float, default=20.0,
                    help="pause after each engine's batch of runs")
    ap.add_argument("--cell-seconds", type=float, default=6.0,
                    help="target for the timed phase of one (model, threads)")
    ap.add_argument("--budget-min", type=float, default=19.0,
                    help="time budget of the whole driver; the timed phases shrink to fit")
    ap.add_argument("--startup-timeout", type=float, default=120.0)
    ap.add_argument("--compile-timeout", type=float, default=240.0,
                    help="startup timeout for torch.compile and Kiln")
    ap.add_argument("--run-timeout", type=float, default=120.0)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "tools", "kiln"))
    ap.add_argument("--pointwise-bench", default=os.path.join(ROOT, "build", "bench", "kiln_pointwise_bench"))
    ap.add_argument("--ceilings", default=os.path.join(ROOT, "build", "bench", "kiln_ceilings"))
    ap.add_argument("--step-overhead", default=os.path.join(ROOT, "build", "bench", "kiln_step_overhead"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "results.json"))
    args = ap.parse_args()
    args.engines = [e for e in args.engines.split(",") if e]
    bad = [e for e in args.engines if e not in ENGINES]
    if bad:
        ap.error("unknown engines %s (known: %s)" % (bad, ",".join(ENGINES)))
    if args.min_runs > args.runs:
        args.runs = args.min_runs
    thread_counts = [int(t) for t in args.threads.split(",") if t]

    start = time.monotonic()
    budget_end = start + args.budget_min * 60 if args.budget_min > 0 else None
    available = zoo_models(args.zoo)
    if args.models:
        names = [n for n in args.models.split(",") if n]
        missing = [n for n in names if n not in available]
        if missing:
            sys.exit("driver: no export of %s in %s" % (",".join(missing), args.zoo))
    else:
        names = model_order(list(available))
    log_dir = os.path.join(os.path.dirname(args.out), "logs")
    os.makedirs(log_dir, exist_ok=True)

    results = dict(date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                   machine=machine_info(), versions=python_versions(args.python),
                   policy=dict(threads=thread_counts, engines=args.engines, rounds=args.rounds,
                               gap_ms=args.gap_ms,
                               warmup=args.warmup, runs=args.runs, min_runs=args.min_runs,
                               cell_seconds=args.cell_seconds, budget_min=args.budget_min,
                               startup_timeout=args.startup_timeout,
                               compile_timeout=args.compile_timeout,
                               run_timeout=args.run_timeout,
                               env={k: os.environ.get(k) for k in
                                    ("TORCHINDUCTOR_CACHE_DIR", "KMP_AFFINITY", "OMP_PROC_BIND",
                                     "OMP_WAIT_POLICY")},
                               command=" ".join(shlex.quote(a) for a in sys.argv)),
                   ceilings={}, cells=[])
    cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache_dir:
        results["inductor_cache_files_at_start"] = sum(len(f) for _, _, f in os.walk(cache_dir))
    try:
        import work  # onnx, from the bench venv
        results["work"] = {n: work.model_work(available[n]) for n in names}
    except ImportError as e:
        log("no roofline work (%s)" % e)
    for t in thread_counts:
        log("ceilings at %d thread(s)" % t)
        results["ceilings"][str(t)] = ceilings(args, t)
    if "pointwise" in names or not args.models:
        log("kiln_pointwise_bench")
        results["pointwise_bench"] = pointwise(args)
    if not args.models:
        log("kiln_step_overhead")
        results["step_overhead"] = step_overhead(args)

    def save():
        results["elapsed_s"] = time.monotonic() - start
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, args.out)

    total = len(names) * len(thread_counts)
    done = 0
    overheads = []  # seconds per cell outside its timed phase (startup, warm-up, quit)
    for name in names:
        for t in thread_counts:
            done += 1
            left_cells = total - done + 1
            share = None
            if budget_end:
                overhead = sum(overheads) / len(overheads) if overheads else 20.0
                share = (budget_end - time.monotonic()) / left_cells - overhead
            log("[%d/%d] %s at %d thread(s)" % (done, total, name, t))
            c0 = time.monotonic()
            cell = run_cell(name, available[name], t, args, log_dir, share)
            cell["cell_s"] = time.monotonic() - c0
            overheads.append(cell["cell_s"] - cell.get("timed_phase_s", 0.0))
            results["cells"].append(cell)
            save()
    save()
    log("done in %.1f min; raw results in %s" % ((time.monotonic() - start) / 60, args.out))


if __name__ == "__main__":
    main()
