"""kiln.torch_backend: torch.compile's FX graphs compiled by Kiln
(docs/PYTHON.md, "torch.compile").

Each graph Dynamo gives goes through the TorchScript ONNX exporter in
memory with its parameters as constants, then kiln.compile. Fused ATen
calls that PyTorch's inference fast paths put in the graph and the exporter
cannot take (nn.TransformerEncoderLayer's _transformer_encoder_layer_fwd,
nn.MultiheadAttention's _native_multi_head_attention) are first replaced
by the same computation written with ordinary calls (_decomposed below).
"""

import os
import sys

from ._kiln import Error


def _log(message):
    print(f"kiln: {message}", file=sys.stderr)


def torch_backend(gm, example_inputs, threads=0, max_sizes=8):
    """A torch.compile backend (`torch.compile(m, backend=kiln.torch_backend)`,
    or backend="kiln" once kiln is imported after torch): each FX graph
    Dynamo gives is exported to ONNX in memory (TorchScript exporter, opset
    17) with its parameters as constants, compiled by Kiln and run by it. A
    graph Kiln cannot take runs eagerly, with one line on stderr naming why.
    A graph with symbolic sizes (dynamic=True, or Dynamo's recompile after
    a size changed) compiles once per set of sizes it is called with,
    keeping the last `max_sizes` (one line on stderr each), as kiln.compile
    does for a model with symbolic dims. Inference only: a graph called with
    grad enabled on tensors that require it runs eagerly; a parameter
    changed in place since the compile makes the graph compile again.
    `threads` is kiln.compile's (0: OpenMP's default)."""
    import collections
    import tempfile
    import threading

    import torch
    from torch.utils import _pytree as pytree

    from . import compile

    def eager(why):
        _log(f"torch.compile graph runs eagerly: {why}")
        return gm.forward

    if max_sizes < 1:
        raise Error(f"torch_backend: max_sizes must be at least 1, not {max_sizes}")
    try:
        kgm = _decompose_fast_paths(gm, torch)  # what is exported; eager runs gm
    except Exception as e:
        return eager(f"{type(e).__name__}: {e}")
    sizes = [i for i, t in enumerate(example_inputs) if isinstance(t, (int, torch.SymInt))]
    if not all(isinstance(t, torch.Tensor) for i, t in enumerate(example_inputs)
               if i not in sizes):
        return eager("an input is not a tensor or a size (" +
                     ", ".join(type(t).__name__ for t in example_inputs) + ")")
    if any(example_inputs[i].device.type != "cpu" for i in range(len(example_inputs))
           if i not in sizes):
        return eager("an input is not on the CPU")
    params = [i for i, t in enumerate(example_inputs) if isinstance(t, torch.nn.Parameter)]
    fed = [i for i in range(len(example_inputs)) if i not in params and i not in sizes]
    dynamic = bool(sizes) or any(not isinstance(d, int) for i in fed
                                 for d in example_inputs[i].shape)

    class Graph(torch.nn.Module):
        # The FX graph with its parameters as buffers (ONNX initializers) and
        # the sizes Dynamo passes as inputs fixed to one call's values.
        def __init__(self, args):
            super().__init__()
            self.gm = kgm
            self.sizes = {i: int(args[i]) for i in sizes}
            for k, i in enumerate(params):
                self.register_buffer(f"param{k}", args[i].detach())

        def forward(self, *xs):
            full, it = [], iter(xs)
            for i in range(len(example_inputs)):
                if i in params:
                    full.append(getattr(self, f"param{params.index(i)}"))
                else:
                    full.append(self.sizes[i] if i in sizes else next(it))
            return self.gm(*full)

    def build(args):
        with torch.no_grad():
            want = gm(*args)
            flat, spec = pytree.tree_flatten(want)
            if not flat or not all(isinstance(t, torch.Tensor) for t in flat):
                raise Error("the graph returns something other than tensors")
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "graph.onnx")
                torch.onnx.export(Graph(args), tuple(args[i].detach() for i in fed), path,
                                  opset_version=17, dynamo=False,
                                  input_names=[f"input{i}" for i in range(len(fed))])
                exe = compile(path, threads=threads)
        # The exporter drops inputs the graph does not read: the rest by name.
        used = [fed[int(name[len("input"):])] for name, _, _ in exe.inputs]
        return exe, spec, len(flat), used

    def key(args):
        return (tuple(tuple(int(d) for d in args[i].shape) for i in fed),
                tuple(int(args[i]) for i in sizes))

    def why(e):
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"

    def concrete(t):  # an example's SymInt as the size it stands for
        return t.node.hint if isinstance(t, torch.SymInt) else t

    first = [concrete(t) for t in example_inputs]
    try:
        built = collections.OrderedDict({key(first): build(first)})
    except Exception as e:  # the reason goes to the log line; eager runs it
        return eager(why(e))

    def version(t):  # an inference tensor has no version counter
        try:
            return (t._version, t.data_ptr())
        except RuntimeError:
            return (None, t.data_ptr())

    versions = [version(example_inputs[i]) for i in params]
    lock = threading.Lock()  # over built and versions: threads may share the graph

    def entry(args):
        """The compiled graph for these sizes (None: they run eagerly)."""
        now = [version(args[i]) for i in params]
        k = key(args)
        with lock:
            if now != versions:  # a parameter changed in place: compile it again
                built.clear()
                versions[:] = now
            if k in built:
                built.move_to_end(k)
                return built[k]
            if dynamic:
                _log(f"torch.compile graph compiles for sizes {k[0]}" +
                     (f", size inputs {k[1]}" if sizes else "") +
                     f" ({min(len(built) + 1, max_sizes)} of at most {max_sizes} kept)")
            try:
                found = build(args)
            except Exception as e:
                _log(f"torch.compile graph runs eagerly at sizes {k[0]}: {why(e)}")
                found = None
            built[k] = found
            while len(built) > max_sizes:
                built.popitem(last=False)
            return found

    def run(*args):
        if torch.is_grad_enabled() and any(t.requires_grad for t in args
                                           if isinstance(t, torch.Tensor)):
            return gm(*args)
        found = entry(args)
        if found is None:
            return gm(*args)
        exe, spec, count, used = found
        outs = exe.run(*(args[i] for i in used))
        if len(outs) != count:
            raise Error(f"the compiled graph returned {len(outs)} outputs, the FX graph {count}")
        return pytree.tree_unflatten(list(outs), spec)

    return run


def _attention(query, key, value, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
               proj_bias, mask=None, need_weights=True, average_attn_weights=True,
               mask_type=None):
    """torch._native_multi_head_attention (nn.MultiheadAttention's inference
    fast path, batch first) in ordinary calls; no mask."""
    import math

    import torch
    import torch.nn.functional as F

    if mask is not None:
        raise Error("_native_multi_head_attention with a mask is not decomposed")
    if query is key and key is value:
        q, k, v = F.linear(query, qkv_weight, qkv_bias).chunk(3, dim=-1)
    else:
        ws, bs = qkv_weight.chunk(3), qkv_bias.chunk(3)
        q, k, v = (F.linear(x, w, b) for x, w, b in zip((query, key, value), ws, bs))
    b, n, s, d = q.shape[0], q.shape[1], k.shape[1], embed_dim // num_heads
    q = q.reshape(b, n, num_heads, d).transpose(1, 2)
    k = k.reshape(b, s, num_heads, d).transpose(1, 2)
    v = v.reshape(b, s, num_heads, d).transpose(1, 2)
    p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
    out = F.linear((p @ v).transpose(1, 2).reshape(b, n, embed_dim), proj_weight, proj_bias)
    if not need_weights:
        return out, None
    return out, p.mean(dim=1) if average_attn_weights else p


def _encoder_layer(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                   use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
                   norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                   mask_type=None):
    """torch._transformer_encoder_layer_fwd (nn.TransformerEncoderLayer's
    inference fast path) in ordinary calls, as ATen's
    transformer_encoder_layer_forward computes it; no mask."""
    import torch.nn.functional as F

    def norm(x, w, b):
        return F.layer_norm(x, (embed_dim,), w, b, eps)

    x = norm(src, norm_weight_1, norm_bias_1) if norm_first else src
    x = _attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                   mask, need_weights=False)[0] + src
    if not norm_first:
        x = norm(x, norm_weight_1, norm_bias_1)
    y = norm(x, norm_weight_2, norm_bias_2) if norm_first else x
    y = F.linear(y, ffn_weight_1, ffn_bias_1)
    y = F.linear(F.gelu(y) if use_gelu else F.relu(y), ffn_weight_2, ffn_bias_2)
    x = x + y
    return x if norm_first else norm(x, norm_weight_2, norm_bias_2)


def _decompose_fast_paths(gm, torch):
    """`gm`, or a copy of it whose fused inference-only calls go to
    _decomposed's functions (the exporter cannot take the fused ones)."""
    import copy

    table = {getattr(torch, name): fn for name, fn in _decomposed.items()
             if hasattr(torch, name)}
    if not any(n.op == "call_function" and n.target in table for n in gm.graph.nodes):
        return gm
    graph = copy.deepcopy(gm.graph)
    for node in graph.nodes:
        if node.op == "call_function" and node.target in table:
            node.target = table[node.target]
    return torch.fx.GraphModule(gm, graph)


_decomposed = {
    "_transformer_encoder_layer_fwd": _encoder_layer,
    "_native_multi_head_attention": _attention,
}
