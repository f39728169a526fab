"""Starts a local Ray cluster on this machine, deploys examples/serve's
KilnModel with two replicas, sends a bounded number of concurrent requests
over loopback HTTP, checks every answer against the expected outputs and
reports throughput and p50/p99 latency (docs/SERVING.md).

    python load_test.py DIR [--concurrency 8] [--rounds 2] [--replicas 2]

DIR is make_artifact.py's output. Exits 1 when an answer is wrong or a
request fails, 0 otherwise; prints one JSON line of figures last.
"""

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight at once")
    p.add_argument("--rounds", type=int, default=2, help="times each sample request is sent")
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-4)
    a = p.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    # The replicas are other processes: they find kiln and kiln_serve through
    # PYTHONPATH (kiln is on this process's path: build/python or installed).
    import kiln
    paths = [here, os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])
    sys.path.insert(0, here)

    import ray
    import requests
    from ray import serve

    from kiln_serve import KilnModel

    inputs = np.load(os.path.join(a.dir, "requests.npy"))
    expected = np.load(os.path.join(a.dir, "expected.npy"))
    artifact = os.path.join(a.dir, "mobilenet_v2.kiln")
    # The baseline: one process running the artifact on the requests one at
    # a time, as one replica would without Ray, HTTP or batching.
    direct = kiln.load(artifact)
    direct(inputs[:1])
    t = time.perf_counter()
    for i in range(len(inputs)):
        direct(inputs[i:i + 1])
    direct_rps = len(inputs) / (time.perf_counter() - t)
    del direct
    port = free_port()
    started = time.perf_counter()
    ray.init(num_cpus=a.replicas, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        handle = serve.run(KilnModel.options(num_replicas=a.replicas).bind(artifact),
                           name="kiln", route_prefix="/")
        ready = time.perf_counter() - started
        url = f"http://127.0.0.1:{port}/"
        local = threading.local()  # a Session per client thread

        def send(i):
            if not hasattr(local, "session"):
                local.session = requests.Session()
            x = inputs[i:i + 1]
            t = time.perf_counter()
            r = local.session.post(url, data=x.tobytes(),
                             headers={"x-shape": ",".join(map(str, x.shape))})
            took = time.perf_counter() - t
            if r.status_code != 200:
                return i, took, 0, f"HTTP {r.status_code}: {r.text.strip()}"
            y = np.frombuffer(r.content, r.headers["x-dtype"]).reshape(
                tuple(int(d) for d in r.headers["x-shape"].split(",")))
            want = expected[i:i + 1]
            if y.shape != want.shape:
                return i, took, 0, f"shape {y.shape}, expected {want.shape}"
            err = np.abs(y - want) - a.atol - a.rtol * np.abs(want)
            if not (err <= 0).all():
                return i, took, 0, f"max error {np.abs(y - want).max():.3g} over the tolerance"
            return i, took, int(r.headers["x-batch-rows"]), None

        send(0)  # the first request of each connection pays for its set-up
        order = [i for _ in range(a.rounds) for i in range(len(inputs))]
        t = time.perf_counter()
        with ThreadPoolExecutor(a.concurrency) as pool:
            results = list(pool.map(send, order))
        wall = time.perf_counter() - t
        bad = [(i, why) for i, _, _, why in results if why]
        # A wrong request gets one located answer, not a crash.
        r = requests.post(url, data=b"\0" * 12, headers={"x-shape": "1,3"})
        rejected = r.status_code == 422 and "this model takes float32" in r.text
        lat = sorted(took for _, took, _, _ in results)
        figures = {
            "requests": len(results), "concurrency": a.concurrency, "replicas": a.replicas,
            "wrong": len(bad), "ready_s": round(ready, 2),
            "throughput_rps": round(len(results) / wall, 1),
            "one_process_rps": round(direct_rps, 1),
            "mean_batch_rows": round(statistics.mean(n for _, _, n, _ in results), 2),
            "p50_ms": round(1e3 * statistics.median(lat), 1),
            "p99_ms": round(1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1),
            "bad_request_rejected": rejected,
        }
        del handle
    finally:
        serve.shutdown()
        ray.shutdown()
    for i, why in bad[:5]:
        print(f"load_test: request {i}: {why}", file=sys.stderr)
    print(json.dumps(figures))
    return 1 if bad or not rejected else 0


if __name__ == "__main__":
    sys.exit(main())
