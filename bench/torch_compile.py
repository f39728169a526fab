"""torch.compile with backend="kiln" against Inductor and eager, side by side.

    PYTHONPATH=build/python build/venv/bin/python bench/torch_compile.py [--threads 1]
        [--runs 30] [--models resnet18,mobilenet_v2,...]

The models are the zoo's (scripts/make_models.py's MODELS, built as the zoo
builds them: seeded random weights, its example inputs) that are not
TorchScript-scripted and have no dynamic axes (the dynamo zoo's variant
where it has one: seq2seq declares its mask causal), plus `transformer` (two
pre-norm blocks written out, 1 x 64 tokens of width 128); --models picks
some. Each runs under torch.inference_mode(); the first call of each
engine compiles (its time is the compile column, Inductor's with its
on-disk cache as the machine has it); then the median of --runs rounds,
each round calling eager, Inductor and Kiln once in turn, so that the
machine's slow spells hit all three alike (a recompile while timed is an
error). Kiln's outputs are checked against eager's (max abs error over all
outputs); a model with a graph the backend ran eagerly says how many.
torch.set_num_threads(T) for all three (Kiln's runs get threads=T too).
Prints a Markdown table and the geomean of Kiln / Inductor.
"""

import argparse
import contextlib
import io
import os
import platform
import statistics
import sys
import time

import torch


class Block(torch.nn.Module):
    """A pre-norm transformer block written out (nn.TransformerEncoderLayer
    takes a fused inference path, aten::_transformer_encoder_layer_fwd,
    that the ONNX exporter cannot export)."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.up, self.down = torch.nn.Linear(width, 2 * width), torch.nn.Linear(2 * width, width)

    def forward(self, x):
        b, n, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, w // self.heads).unbind(2)
        a = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + self.out(a.transpose(1, 2).reshape(b, n, w))
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))


def make_models():
    """scripts/make_models.py, the zoo's builder."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(root, "scripts"))
    import make_models as module
    return module


def models(names):
    """name -> (module, example inputs) for the names asked for, in order."""
    zoo = make_models()
    out = {}
    for name in names:
        if name == "transformer":
            torch.manual_seed(0)
            out[name] = (torch.nn.Sequential(Block(128, 4), Block(128, 4)).eval(),
                         [torch.randn(1, 64, 128)])
        elif name in zoo.MODELS and not zoo.MODELS[name].get("script"):
            # The dynamo zoo's variant where there is one (seq2seq declares its
            # mask causal: Dynamo breaks the graph at nn.Transformer's check).
            spec = zoo.DYNAMO_MODELS.get(name, zoo.MODELS[name])
            model, inputs, _ = zoo.build_model(name, spec)
            out[name] = (model, inputs)
        else:
            raise SystemExit(f"torch_compile.py: no model '{name}' (the zoo's unscripted "
                             "models and transformer)")
    return out


def zoo_names():
    return [n for n, spec in make_models().MODELS.items()
            if not spec.get("script") and "dynamic" not in n] + ["transformer"]


def flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    return [t for o in out for t in flat(o)]


def first_call(fn, xs):
    """fn's first output and how long the first call took (the compile)."""
    start = time.perf_counter()
    out = fn(*xs)
    return out, time.perf_counter() - start


def interleaved(fns, xs, runs):
    """Median ms of each of `fns` over `runs` rounds, each round calling
    every fn once in turn, so that the machine's slow spells hit all of
    them alike."""
    for fn in fns:
        fn(*xs)
    times = [[] for _ in fns]
    for _ in range(runs):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            fn(*xs)
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) * 1e3 for ts in times]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--models", default="", help="comma-separated (default: all)")
    ap.add_argument("--no-allow-rnn", action="store_true",
                    help="leave torch._dynamo.config.allow_rnn off (Dynamo's default)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import kiln

    graphs_given = [0]

    def kiln_backend(gm, example_inputs):  # the registered backend, at T threads
        graphs_given[0] += 1
        return kiln.torch_backend(gm, example_inputs, threads=args.threads)

    # Dynamo breaks the graph at nn.LSTM/GRU/RNN unless allow_rnn is on; on,
    # they reach the backend (Kiln) or run ATen's kernel (Inductor).
    torch._dynamo.config.allow_rnn = not args.no_allow_rnn

    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"{args.threads} thread(s); median of {args.runs} runs; torch {torch.__version__}; "
          f"torch._dynamo.config.allow_rnn={torch._dynamo.config.allow_rnn}.\n")
    print("| model | eager ms | Inductor ms | Kiln ms | Kiln / Inductor | Kiln / eager | "
          "Inductor compile s | Kiln compile s | Kiln max abs error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    names = args.models.split(",") if args.models else zoo_names()
    for name, (model, xs) in models(names).items():
        with torch.inference_mode():
            want, _ = first_call(model, xs)
            torch._dynamo.reset()
            inductor = torch.compile(model)
            _, ind_s = first_call(inductor, xs)
            log = io.StringIO()
            graphs_given[0] = 0
            with contextlib.redirect_stderr(log):
                fast = torch.compile(model, backend=kiln_backend)
                got, kiln_s = first_call(fast, xs)
                graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
                eager_ms, ind_ms, kiln_ms = interleaved([model, inductor, fast], xs, args.runs)
                if torch._dynamo.utils.counters["stats"]["unique_graphs"] != graphs:
                    raise SystemExit(f"torch_compile.py: {name} compiled again while timed")
            err = max((g - w).abs().max().item() for g, w in zip(flat(got), flat(want)))
        eager_graphs = log.getvalue().count("graph runs eagerly")
        note = f" ({eager_graphs} graph(s) ran eagerly)" if eager_graphs else ""
        if not graphs_given[0]:
            note = " (Dynamo gave no graph: eager for every backend; not in the geomean)"
        else:
            ratios.append(kiln_ms / ind_ms)
        print(f"| {name}{note} | {eager_ms:.2f} | {ind_ms:.2f} | {kiln_ms:.2f} | "
              f"{kiln_ms / ind_ms:.2f} | {kiln_ms / eager_ms:.2f} | {ind_s:.1f} | {kiln_s:.1f} | "
              f"{err:.1e} |", flush=True)
    geo = statistics.geometric_mean(ratios)
    print(f"\nGeomean of Kiln / Inductor over {len(ratios)} models: {geo:.2f}; "
          f"Kiln faster on {sum(r < 1 for r in ratios)} of {len(ratios)}.")


if __name__ == "__main__":
    sys.exit(main())
