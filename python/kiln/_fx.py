"""kiln.from_torch: a torch.nn.Module captured with torch.fx, without ONNX.

The module is traced symbolically (torch.fx.symbolic_trace's Tracer, which
both Debian's torch 1.13 and torch 2.x have) and run once on the example
inputs by an fx.Interpreter that records every node's value: tensors give
the types (dtype and static shape) of Kiln's values, and Python values
(sizes, shapes, dims) are folded into attributes. Each node then maps onto
Kiln's op table through the rows of _tables() below, written as `.kir` text (docs/IR.md) with the parameters and buffers
as blobs and each node's location the innermost frame of its Python stack
(loc("model.py":12:0)), and loaded with kiln.Model.load. Every call target
Kiln cannot take is listed at once, by name and location, in one
kiln.Error. Sizes are those of the example inputs, except the dynamic dims
that kiln._dynamic makes symbolic.
"""

import base64
import math
import operator
import os
import re
import tempfile

_DTYPES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
    "bool": "bool",
}


class _Unsupported(Exception):
    pass


class _Downstream(Exception):
    """An operand is the result of a call that is not mapped."""


def _kir_float(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


_END = 2**63 - 1  # a slice's open end, as ONNX writes it


class _Expr(str):
    """An integer attribute written as a symbolic expression (`2*S+1`)."""


def _attr(v):
    if isinstance(v, _Expr):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _kir_float(v)
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_attr(x) for x in v) + "]"
    raise TypeError(f"attribute value {v!r}")


def _pair(v, n):
    return list(v) if isinstance(v, (list, tuple)) else [int(v)] * n


class _Writer:
    """One graph's nodes, recorded node by node as (results, op, operands,
    attrs, types, loc) with types as (dtype, [dims]) and a constant's blob
    name in attrs["@"]; render() writes the .kir text. kiln._dynamic
    compares the records of several sizes to make dims symbolic."""

    def __init__(self, torch):
        self.torch = torch
        self.nodes = []
        self.blobs = {}  # blob name -> bytes
        self.count = 0
        self.loc = ""
        self.named = {}  # blob name -> value

    def type_of(self, t):
        name = str(t.dtype).replace("torch.", "")
        if name not in _DTYPES:
            raise _Unsupported(f"dtype {t.dtype}")
        # A symbolic size (torch.export's SymInt) is left to Kiln's inference.
        return (_DTYPES[name], [int(d) if isinstance(d, int) else "?" for d in t.shape])

    def fresh(self):
        self.count += 1
        return f"%v{self.count}"

    def op(self, name, operands, result, attrs=None):
        """Emits `name(operands) {attrs}` typed like the tensor `result`."""
        return self.op_multi(name, operands, [result], attrs or {})[0]

    def op_multi(self, name, operands, results, attrs):
        """Emits an op of several results, typed like the tensors `results`."""
        types = [self.type_of(r) for r in results]
        vs = [self.fresh() for _ in results]
        self.nodes.append((vs, name, list(operands), dict(attrs), types, self.loc))
        return vs

    def const(self, t, name=None):
        """A constant of tensor `t`; one of a parameter's name is made once."""
        if name in self.named:
            return self.named[name]
        t = t.detach().contiguous().cpu()
        v = self.fresh()
        if name:
            self.named[name] = v
        blob = name or f"cst{self.count}"
        if t.dtype == self.torch.bool:
            data = t.to(self.torch.uint8).numpy().tobytes()
        elif t.dtype == self.torch.bfloat16:
            data = t.view(self.torch.int16).numpy().tobytes()
        else:
            data = t.numpy().tobytes()
        self.blobs[blob] = data
        self.nodes.append(([v], "constant", [], {"@": blob}, [self.type_of(t)], self.loc))
        return v

    def render(self, name, inputs, outputs, output_types):
        """The module's .kir text: `inputs` are (value, type) pairs."""
        lines = []
        for vs, op, operands, attrs, types, loc in self.nodes:
            ty = ", ".join(_type_text(t) for t in types)
            if op == "constant":
                lines.append(f"  {vs[0]} = constant @{attrs['@']} : {ty}{loc}")
                continue
            text = ", ".join(f"{k} = {_attr(x)}" for k, x in attrs.items())
            lines.append(f"  {', '.join(vs)} = {op}({', '.join(operands)})" +
                         (f" {{{text}}}" if text else "") + f" : {ty}{loc}")
        text = (f"graph @{name}(" + ", ".join(f"{v}: {_type_text(t)}" for v, t in inputs) +
                ") -> (" + ", ".join(_type_text(t) for t in output_types) + ") {\n" +
                "\n".join(lines) + "\n  return " + ", ".join(outputs) + "\n}\n")
        if self.blobs:
            text += "blobs {\n" + "\n".join(
                f'  @{k} = "{base64.b64encode(d).decode()}"' for k, d in self.blobs.items()) + "\n}\n"
        return text


def _type_text(t):
    return f"{t[0]}[{','.join(str(d) for d in t[1])}]"


def _location(node, skip, innermost_first):
    """The innermost frame of the node's Python stack outside torch and kiln
    (the model's source line), else the node's name. torch 1.x records the
    stack innermost frame first, torch 2.x outermost first."""
    trace = node.meta.get("stack_trace") or ""
    frames = [f for f in re.findall(r'File "([^"]+)", line (\d+)', trace)
              if not f[0].startswith(skip)]
    if frames:
        path, line = frames[0] if innermost_first else frames[-1]
        return f' loc("{path}":{line}:0)'
    return f' loc("{node.name}")'


def from_torch(module, example_inputs, load, dynamic_shapes=None):
    import torch
    import torch.fx as fx

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    tracer = fx.Tracer()
    tracer.record_stack_traces = True
    tracer.proxy_buffer_attributes = True  # a buffer sliced by a size (self.pos[:, :n])
    try:
        graph = tracer.trace(module)
    except Exception as e:  # control flow on values, iteration of a proxy, ...
        raise _error(f"from_torch: torch.fx cannot trace {type(module).__name__}: "
                     f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
    gm = fx.GraphModule(module, graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(example_inputs) != len(placeholders):
        raise _error(f"from_torch: {type(module).__name__} takes {len(placeholders)} input(s), "
                     f"the example gives {len(example_inputs)}")

    def capture(inputs):
        """The module's records at these inputs: the writer, its inputs as
        (value, type) and its outputs as (value, type)."""
        values = _record(torch, fx, module, gm, inputs)
        return _convert(torch, fx, module, gm, graph, values)

    if dynamic_shapes is None:
        w, ins, outs = capture(example_inputs)
        text = w.render(type(module).__name__, ins, [v for v, _ in outs], [t for _, t in outs])
    else:
        from ._dynamic import capture_symbolic
        text = capture_symbolic(torch, module, placeholders, example_inputs, dynamic_shapes,
                                capture, _error)
    return _load_text(text, type(module).__name__, load)


def _load_text(text, name, load):
    """The Model of .kir `text` (also written to $KILN_FROM_TORCH_DUMP)."""
    if os.environ.get("KILN_FROM_TORCH_DUMP"):
        with open(os.environ["KILN_FROM_TORCH_DUMP"], "w") as f:
            f.write(text)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, name + ".kir")
        with open(path, "w") as f:
            f.write(text)
        return load(path)


def _record(torch, fx, module, gm, inputs):
    """Runs the traced module on `inputs` in eval mode; every node's value."""
    values = {}

    class Recorder(fx.Interpreter):
        def run_node(self, n):
            r = super().run_node(n)
            values[n] = r
            return r

    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            Recorder(gm).run(*inputs)
    except Exception as e:  # wrong inputs for the module
        raise _error(f"from_torch: {type(module).__name__} does not run on the example "
                     f"inputs{_sizes(inputs)}: "
                     f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
    finally:
        module.train(was_training)
    return values


def _sizes(inputs):
    return " (sizes " + ", ".join(str(list(t.shape)) for t in inputs) + ")"


def _convert(torch, fx, module, gm, graph, values):
    """Maps the recorded graph onto Kiln's ops; raises one error listing
    every call Kiln cannot take."""
    w = _Writer(torch)
    names = {}      # fx node -> kir value
    missing = []    # (target, location)
    params = [f"%{re.sub(r'[^A-Za-z0-9_]', '_', n.name)}" for n in graph.nodes
              if n.op == "placeholder"]
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for n, p in zip(placeholders, params):
        if not isinstance(values.get(n), torch.Tensor):
            raise _error(f"from_torch: input '{n.name}' is not a tensor")
        names[n] = p

    def arg(a):
        """A tensor operand's kir value, or the Python value of anything else."""
        if isinstance(a, fx.Node):
            if a in names:
                return names[a]
            if _has_tensor(values[a], torch):
                raise _Downstream()
            return values[a]
        if isinstance(a, (list, tuple)):
            return type(a)(arg(x) for x in a)
        return a

    def tensor(a, like):
        """`a` as a kir value: a node's, or a Python scalar as a constant."""
        v = arg(a)
        if isinstance(v, str):
            return v
        if isinstance(v, torch.Tensor):
            return w.const(v)
        return w.const(torch.tensor(v, dtype=like.dtype))

    class Context:
        pass

    c = Context()
    c.w, c.arg, c.tensor = w, arg, tensor
    c.value = lambda a: values[a] if isinstance(a, fx.Node) else a
    modules, functions, methods = _tables()
    skip = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep)
    innermost_first = int(torch.__version__.split(".")[0]) < 2
    outputs = []
    for n in graph.nodes:
        w.loc = _location(n, skip, innermost_first)
        if n.op == "placeholder":
            continue
        if n.op == "output":
            outs = n.args[0]
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            for o in outs:
                if missing:
                    break
                if not (isinstance(o, fx.Node) and o in names):
                    raise _error("from_torch: the module returns something other than tensors")
                outputs.append((names[o], w.type_of(values[o])))
            continue
        result = values[n]
        if n.op == "get_attr":
            if isinstance(result, torch.Tensor):
                names[n] = w.const(result, _blob_name(n.target))
            continue
        if n.op == "call_module":
            target = gm.get_submodule(n.target)
            rule = modules.get(type(target))
            label = type(target).__module__ + "." + type(target).__name__
        elif n.op == "call_method":
            rule = methods.get(n.target)
            target = None
            label = "Tensor." + n.target
        else:
            target = n.target
            rule = functions.get(n.target)
            label = getattr(n.target, "__module__", "") + "." + getattr(
                n.target, "__name__", str(n.target))
        if not _has_tensor(result, torch):
            continue  # sizes, shapes and other Python values fold into attributes
        if rule is None:
            missing.append((label, w.loc.strip()))
            continue
        try:
            out = rule(c, n, target if n.op == "call_module" else None, result)
        except _Unsupported as e:
            missing.append((f"{label} ({e})", w.loc.strip()))
            continue
        except _Downstream:
            if not missing:  # an operand no row made: a bug of a row
                missing.append((f"{label} (an operand has no value)", w.loc.strip()))
            continue
        if out is not None:
            names[n] = out
    if missing:
        counts = {}
        for m in missing:
            counts[m] = counts.get(m, 0) + 1
        raise _error("from_torch: Kiln cannot take %d call%s:\n" %
                     (len(missing), "" if len(missing) == 1 else "s") +
                     "\n".join(f"  {t} at {loc}" + (f" ({k} calls)" if k > 1 else "")
                               for (t, loc), k in counts.items()))
    inputs = [(p, w.type_of(values[n])) for n, p in zip(placeholders, params)]
    return w, inputs, outputs


def _error(message):
    from ._kiln import Error
    return Error(message)


def _blob_name(target):
    return re.sub(r"[^A-Za-z0-9_.]", "_", target)


def _has_tensor(v, torch):
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, dict):
        v = list(v.values())
    return isinstance(v, (list, tuple)) and any(_has_tensor(x, torch) for x in v)


# --- The rows: one function per module type, function or method. ------------
# Each gets (c, node, module, result): c.w the writer, c.arg(a) a tensor
# operand's kir value (or the Python value of anything else), c.tensor(a,
# like) a kir value also for a Python scalar, c.value(a) a node's recorded
# value; the module is the call_module's submodule (else None). It returns
# the kir value of the node's result, or raises _Unsupported(why).


def _conv(c, n, m, result):
    import torch
    rank = m.weight.dim() - 2
    if m.padding_mode != "zeros":
        raise _Unsupported(f"padding_mode '{m.padding_mode}'")
    transposed = isinstance(m, torch.nn.modules.conv._ConvTransposeNd)
    x = c.arg(n.args[0])
    pad = m.padding
    if isinstance(pad, str):
        if pad == "valid":
            pad = [0] * rank
        else:  # "same", stride 1: PyTorch puts the odd element at the end
            total = [d * (k - 1) for d, k in zip(_pair(m.dilation, rank), m.kernel_size)]
            begin = [t // 2 for t in total]
            pads = begin + [t - b for t, b in zip(total, begin)]
            pad = None
    if pad is not None:
        pads = _pair(pad, rank) * 2
    attrs = {"strides": _pair(m.stride, rank), "pads": pads,
             "dilations": _pair(m.dilation, rank), "group": int(m.groups)}
    operands = [x, c.w.const(m.weight, _blob_name(n.target + ".weight"))]
    if m.bias is not None:
        operands.append(c.w.const(m.bias, _blob_name(n.target + ".bias")))
    if transposed:
        attrs["output_padding"] = _pair(m.output_padding, rank)
        return c.w.op("conv_transpose", operands, result, attrs)
    return c.w.op("conv", operands, result, attrs)


def _linear(c, n, m, result, weight=None, bias=None):
    x = c.arg(n.args[0])
    wname = bname = None
    if m is not None:
        weight, bias = m.weight, m.bias
        wname, bname = _blob_name(n.target + ".weight"), _blob_name(n.target + ".bias")
    if result.dim() == 2:
        ops = [x, c.w.const(weight, wname)] + (
            [c.w.const(bias, bname)] if bias is not None else [])
        return c.w.op("gemm", ops, result, {"trans_b": True})
    y = c.w.op("matmul", [x, c.w.const(weight.t(), wname and wname + ".T")], result)
    return c.w.op("add", [y, c.w.const(bias, bname)], result) if bias is not None else y


def _batch_norm(c, n, m, result):
    import torch
    if m.training or m.running_mean is None:
        raise _Unsupported("batch statistics (training mode or no running stats)")
    channels = m.num_features
    weight = m.weight if m.weight is not None else torch.ones(channels)
    bias = m.bias if m.bias is not None else torch.zeros(channels)
    name = _blob_name(n.target)
    return c.w.op("batch_norm", [c.arg(n.args[0]), c.w.const(weight, name + ".weight"),
                                 c.w.const(bias, name + ".bias"),
                                 c.w.const(m.running_mean, name + ".running_mean"),
                                 c.w.const(m.running_var, name + ".running_var")],
                result, {"epsilon": float(m.eps)})


def _layer_norm_of(c, x, shape, weight, bias, eps, result):
    import torch
    k = len(shape)
    weight = weight if weight is not None else torch.ones(shape)
    ops = [x, c.w.const(weight)] + ([c.w.const(bias)] if bias is not None else [])
    return c.w.op("layer_norm", ops, result, {"axis": -k, "epsilon": float(eps)})


def _layer_norm(c, n, m, result):
    return _layer_norm_of(c, c.arg(n.args[0]), tuple(m.normalized_shape),
                          m.weight if m.elementwise_affine else None,
                          m.bias if m.elementwise_affine else None, m.eps, result)


def _functional_layer_norm(c, n, m, result):
    names = ["normalized_shape", "weight", "bias", "eps"]
    defaults = {"weight": None, "bias": None, "eps": 1e-5}
    a = {k: c.value(n.kwargs.get(k, n.args[i + 1] if len(n.args) > i + 1 else defaults.get(k)))
         for i, k in enumerate(names)}
    shape = a["normalized_shape"]
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return _layer_norm_of(c, c.arg(n.args[0]), shape, a["weight"], a["bias"], a["eps"], result)


def _pool(kind):
    def rule(c, n, m, result):
        rank = result.dim() - 2
        k = _pair(m.kernel_size, rank)
        s = _pair(m.stride if m.stride is not None else m.kernel_size, rank)
        p = _pair(m.padding, rank)
        attrs = {"kernel": k, "strides": s, "pads": p * 2, "ceil_mode": bool(m.ceil_mode)}
        if kind == "max_pool":
            if getattr(m, "return_indices", False):
                raise _Unsupported("return_indices")
            attrs["dilations"] = _pair(m.dilation, rank)
        else:
            if getattr(m, "divisor_override", None):
                raise _Unsupported("divisor_override")
            attrs["count_include_pad"] = bool(m.count_include_pad)
        return c.w.op(kind, [c.arg(n.args[0])], result, attrs)
    return rule


def _adaptive_avg(c, x, inp, result):
    out = list(result.shape[2:])
    size = list(inp.shape[2:])
    if all(o == 1 for o in out):
        return c.w.op("global_avg_pool", [x], result)
    if all(s % o == 0 for s, o in zip(size, out)):
        k = [s // o for s, o in zip(size, out)]
        return c.w.op("avg_pool", [x], result, {"kernel": k, "strides": k})
    raise _Unsupported(f"output size {out} does not divide the input size {size}")


def _unary(name, **attrs):
    return lambda c, n, m, result: c.w.op(name, [c.arg(n.args[0])], result, attrs or None)


def _identity(c, n, m, result):
    return c.arg(n.args[0])


def _reshape(c, n, m, result):
    return c.w.op("reshape", [c.arg(n.args[0])], result, {"shape": list(result.shape)})


def _binary(name):
    def rule(c, n, m, result):
        a, b = n.args[0], n.args[1]
        if n.kwargs.get("alpha", 1) != 1:
            raise _Unsupported("alpha")
        operands = [c.tensor(a, result), c.tensor(b, result)]
        return c.w.op(name, operands, result)
    return rule


def _dim(d, rank):
    return d + rank if d < 0 else d


def _softmax(name):
    def rule(c, n, m, result):
        dim = m.dim if m is not None and hasattr(m, "dim") else n.kwargs.get(
            "dim", n.args[1] if len(n.args) > 1 else None)
        if dim is None:
            raise _Unsupported("an implicit dim")
        return c.w.op(name, [c.arg(n.args[0])], result, {"axis": _dim(dim, result.dim())})
    return rule


def _cat(c, n, m, result):
    parts = c.arg(n.args[0])
    dim = n.kwargs.get("dim", n.args[1] if len(n.args) > 1 else 0)
    if not all(isinstance(p, str) for p in parts):
        raise _Unsupported("an operand that is not a traced tensor")
    return c.w.op("concat", list(parts), result, {"axis": _dim(dim, result.dim())})


def _permute(c, n, m, result):
    dims = n.args[1:] if len(n.args) > 2 or isinstance(n.args[1], int) else n.args[1]
    dims = n.kwargs.get("dims", dims)
    rank = result.dim()
    return c.w.op("transpose", [c.arg(n.args[0])], result, {"perm": [_dim(int(d), rank) for d in c.arg(dims)]})


def _transpose(c, n, m, result):
    rank = result.dim()
    a, b = _dim(int(c.arg(n.args[1])), rank), _dim(int(c.arg(n.args[2])), rank)
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return c.w.op("transpose", [c.arg(n.args[0])], result, {"perm": perm})


def _mean(name):
    def rule(c, n, m, result):
        dims = n.kwargs.get("dim", n.args[1] if len(n.args) > 1 else None)
        keep = n.kwargs.get("keepdim", n.args[2] if len(n.args) > 2 else False)
        x = c.arg(n.args[0])
        src_rank = c.value(n.args[0]).dim()
        if dims is None:
            dims = list(range(src_rank))
        dims = [dims] if isinstance(dims, int) else list(dims)
        return c.w.op(name, [x], result, {"axes": [_dim(d, src_rank) for d in dims],
                                        "keepdims": bool(keep)})
    return rule


def _hardtanh(lo, hi):
    def rule(c, n, m, result):
        a, b = (m.min_val, m.max_val) if m is not None and hasattr(m, "min_val") else (lo, hi)
        if m is None:
            a = n.kwargs.get("min_val", n.args[1] if len(n.args) > 1 else a)
            b = n.kwargs.get("max_val", n.args[2] if len(n.args) > 2 else b)
        return c.w.op("clip", [c.arg(n.args[0])], result, {"min": float(a), "max": float(b)})
    return rule


def _clamp(c, n, m, result):
    lo = n.kwargs.get("min", n.args[1] if len(n.args) > 1 else None)
    hi = n.kwargs.get("max", n.args[2] if len(n.args) > 2 else None)
    if not all(isinstance(b, (int, float, type(None))) for b in (lo, hi)):
        raise _Unsupported("tensor bounds")
    return c.w.op("clip", [c.arg(n.args[0])], result,
                {"min": float("-inf") if lo is None else float(lo),
                 "max": float("inf") if hi is None else float(hi)})


def _silu(c, n, m, result):
    x = c.arg(n.args[0])
    return c.w.op("mul", [x, c.w.op("sigmoid", [x], result)], result)


def _gelu(c, n, m, result):
    approx = m.approximate if m is not None else n.kwargs.get("approximate", "none")
    return c.w.op("gelu", [c.arg(n.args[0])], result, {"approximate": approx})


def _leaky(c, n, m, result):
    slope = m.negative_slope if m is not None else n.kwargs.get(
        "negative_slope", n.args[1] if len(n.args) > 1 else 0.01)
    return c.w.op("leaky_relu", [c.arg(n.args[0])], result, {"alpha": float(slope)})


def _functional_linear(c, n, m, result):
    weight = c.value(n.args[1])
    bias = n.kwargs.get("bias", n.args[2] if len(n.args) > 2 else None)
    return _linear(c, n, None, result, weight=weight,
                   bias=c.value(bias) if bias is not None else None)


def _adaptive(c, n, m, result):
    return _adaptive_avg(c, c.arg(n.args[0]), c.value(n.args[0]), result)


def _split(c, n, m, result):
    """chunk and split: one split op; getitem picks a part."""
    x = c.value(n.args[0])
    dim = n.kwargs.get("dim", n.args[2] if len(n.args) > 2 else 0)
    dim = _dim(int(dim), x.dim())
    return c.w.op_multi("split", [c.arg(n.args[0])], list(result),
                        {"axis": dim, "sizes": [int(r.shape[dim]) for r in result]})


def _getitem(c, n, m, result):
    seq, index = n.args
    v = c.arg(seq)
    if isinstance(v, list):  # a part of a split
        return v[index]
    x = c.value(seq)
    if not isinstance(index, tuple):
        index = (index,)
    # Slices and ints per dim (an Ellipsis fills the middle, None adds a
    # dim): one slice op, then a reshape to the result's shape.
    index = list(index)
    if any(i is Ellipsis for i in index):
        e = index.index(Ellipsis)
        fill = x.dim() - sum(1 for i in index if i is not None and i is not Ellipsis)
        index[e:e + 1] = [slice(None)] * fill
    # Bounds as written (ONNX's rule: negative from the end, clamped), so
    # that one a size computes (x[:, :n]) stays that expression when the
    # size is dynamic (kiln._dynamic); the static sizes come from indices().
    starts, ends, axes, steps, sliced = [], [], [], [], list(x.shape)
    d = 0
    for i in index:
        if i is None:
            continue
        i = c.value(i)
        if isinstance(i, int):
            starts.append(i), ends.append(i + 1 if i != -1 else _END), axes.append(d)
            steps.append(1)
            sliced[d] = 1
        elif isinstance(i, slice):
            i = slice(c.value(i.start), c.value(i.stop), c.value(i.step))
            if not all(isinstance(b, (int, type(None))) for b in (i.start, i.stop, i.step)):
                raise _Unsupported("a slice bound that is not an int")
            lo, hi, step = i.indices(int(x.shape[d]))
            if step <= 0:
                raise _Unsupported("a negative step")
            if (i.start in (None, 0)) and i.stop is None and step == 1:
                d += 1
                continue
            starts.append(0 if i.start is None else i.start)
            ends.append(_END if i.stop is None else i.stop)
            axes.append(d), steps.append(step)
            sliced[d] = max(0, (hi - lo + step - 1) // step)
        else:
            raise _Unsupported(f"an index of type {type(i).__name__}")
        d += 1
    y = c.arg(seq)
    have = list(x.shape)
    if axes:
        import torch
        y = c.w.op("slice", [y], torch.empty(sliced, dtype=x.dtype),
                   {"starts": starts, "ends": ends, "axes": axes, "steps": steps})
        have = sliced
    if list(result.shape) != have:
        y = c.w.op("reshape", [y], result, {"shape": list(result.shape)})
    return y


def _functional_pool(kind):
    class Spec:  # the module's fields, from the call's arguments
        pass

    names = ["kernel_size", "stride", "padding"] + (
        ["dilation", "ceil_mode", "return_indices"] if kind == "max_pool" else
        ["ceil_mode", "count_include_pad", "divisor_override"])
    defaults = {"stride": None, "padding": 0, "dilation": 1, "ceil_mode": False,
                "return_indices": False, "count_include_pad": True, "divisor_override": None}

    def rule(c, n, m, result):
        spec = Spec()
        for i, k in enumerate(names):
            v = n.kwargs.get(k, n.args[i + 1] if len(n.args) > i + 1 else defaults.get(k))
            setattr(spec, k, c.value(v))
        if not spec.stride:
            spec.stride = spec.kernel_size
        return _pool(kind)(c, n, spec, result)
    return rule


def _stochastic_depth(c, n, m, result):
    training = n.kwargs.get("training", n.args[3] if len(n.args) > 3 else True)
    if training:
        raise _Unsupported("training=True")
    return c.arg(n.args[0])


def _expand(c, n, m, result):
    return c.w.op("expand", [c.arg(n.args[0])], result, {"shape": list(result.shape)})


def _attention(c, n, m, result):
    """nn.MultiheadAttention in eval, without masks: the projections, the
    scaled dot product per head, softmax, and the output projection. Its
    result is (output, None): the averaged weights are not computed."""
    import torch
    args = dict(zip(["query", "key", "value", "key_padding_mask", "need_weights", "attn_mask",
                     "average_attn_weights", "is_causal"], n.args))
    args.update(n.kwargs)
    if args.get("key_padding_mask") is not None or args.get("attn_mask") is not None or \
            args.get("is_causal"):
        raise _Unsupported("attention masks")
    if m.in_proj_weight is None or m.bias_k is not None or m.add_zero_attn:
        raise _Unsupported("separate q/k/v weights, bias_k/bias_v or add_zero_attn")
    users = [u for u in n.users if u.target is operator.getitem and u.args[1] != 0]
    if any(u.users for u in users):
        raise _Unsupported("the attention weights are used")
    q, k, v = (c.value(args[x]) for x in ("query", "key", "value"))
    dt = q.dtype

    def like(*shape):
        return torch.empty(shape, dtype=dt)

    def to_batch_first(node, t):
        x = c.arg(node)
        if m.batch_first:
            return x, t.shape
        return c.w.op("transpose", [x], like(t.shape[1], t.shape[0], t.shape[2]),
                      {"perm": [1, 0, 2]}), (t.shape[1], t.shape[0], t.shape[2])

    e, h = m.embed_dim, m.num_heads
    d = e // h
    name = _blob_name(n.target)
    w_in, b_in = m.in_proj_weight.detach(), m.in_proj_bias

    def project(node, t, part):
        x, (b, length, _) = to_batch_first(node, t)
        wt = c.w.const(w_in[part * e:(part + 1) * e].t(), f"{name}.in_proj_weight.{part}.T")
        y = c.w.op("matmul", [x, wt], like(b, length, e))
        if b_in is not None:
            y = c.w.op("add", [y, c.w.const(b_in[part * e:(part + 1) * e],
                                            f"{name}.in_proj_bias.{part}")], like(b, length, e))
        y = c.w.op("reshape", [y], like(b, length, h, d), {"shape": [b, length, h, d]})
        return y, b, length

    qh, b, lq = project(args["query"], q, 0)
    kh, _, lk = project(args["key"], k, 1)
    vh, _, _ = project(args["value"], v, 2)
    qh = c.w.op("transpose", [qh], like(b, h, lq, d), {"perm": [0, 2, 1, 3]})
    kh = c.w.op("transpose", [kh], like(b, h, d, lk), {"perm": [0, 2, 3, 1]})
    vh = c.w.op("transpose", [vh], like(b, h, lk, d), {"perm": [0, 2, 1, 3]})
    scores = c.w.op("matmul", [qh, kh], like(b, h, lq, lk))
    scale = c.w.const(torch.tensor(1.0 / math.sqrt(d), dtype=dt))
    scores = c.w.op("mul", [scores, scale], like(b, h, lq, lk))
    probs = c.w.op("softmax", [scores], like(b, h, lq, lk), {"axis": 3})
    out = c.w.op("matmul", [probs, vh], like(b, h, lq, d))
    out = c.w.op("transpose", [out], like(b, lq, h, d), {"perm": [0, 2, 1, 3]})
    out = c.w.op("reshape", [out], like(b, lq, e), {"shape": [b, lq, e]})
    wo = c.w.const(m.out_proj.weight.detach().t(), f"{name}.out_proj.weight.T")
    out = c.w.op("matmul", [out, wo], like(b, lq, e))
    if m.out_proj.bias is not None:
        out = c.w.op("add", [out, c.w.const(m.out_proj.bias, f"{name}.out_proj.bias")],
                     like(b, lq, e))
    if not m.batch_first:
        out = c.w.op("transpose", [out], like(lq, b, e), {"perm": [1, 0, 2]})
    return [out, None]


def _tables():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    modules = {
        nn.Conv1d: _conv, nn.Conv2d: _conv, nn.Conv3d: _conv,
        nn.ConvTranspose1d: _conv, nn.ConvTranspose2d: _conv, nn.ConvTranspose3d: _conv,
        nn.Linear: _linear,
        nn.BatchNorm1d: _batch_norm, nn.BatchNorm2d: _batch_norm, nn.BatchNorm3d: _batch_norm,
        nn.LayerNorm: _layer_norm,
        nn.MaxPool1d: _pool("max_pool"), nn.MaxPool2d: _pool("max_pool"),
        nn.MaxPool3d: _pool("max_pool"),
        nn.AvgPool1d: _pool("avg_pool"), nn.AvgPool2d: _pool("avg_pool"),
        nn.AvgPool3d: _pool("avg_pool"),
        nn.AdaptiveAvgPool1d: _adaptive, nn.AdaptiveAvgPool2d: _adaptive,
        nn.AdaptiveAvgPool3d: _adaptive,
        nn.ReLU: _unary("relu"), nn.ReLU6: _hardtanh(0.0, 6.0), nn.Hardtanh: _hardtanh(-1.0, 1.0),
        nn.Sigmoid: _unary("sigmoid"), nn.Tanh: _unary("tanh"), nn.GELU: _gelu,
        nn.SiLU: _silu, nn.Hardswish: _unary("hard_swish"),
        nn.Hardsigmoid: _unary("hard_sigmoid", alpha=1.0 / 6.0, beta=0.5),
        nn.LeakyReLU: _leaky, nn.Softmax: _softmax("softmax"),
        nn.LogSoftmax: _softmax("log_softmax"),
        nn.Identity: _identity, nn.Dropout: _identity, nn.Dropout2d: _identity,
        nn.Flatten: _reshape, nn.MultiheadAttention: _attention,
    }
    functions = {
        operator.add: _binary("add"), operator.iadd: _binary("add"), torch.add: _binary("add"),
        operator.sub: _binary("sub"), torch.sub: _binary("sub"),
        operator.mul: _binary("mul"), operator.imul: _binary("mul"), torch.mul: _binary("mul"),
        operator.truediv: _binary("div"), torch.div: _binary("div"),
        operator.matmul: _binary("matmul"), torch.matmul: _binary("matmul"),
        torch.relu: _unary("relu"), F.relu: _unary("relu"), torch.sigmoid: _unary("sigmoid"),
        torch.tanh: _unary("tanh"), torch.exp: _unary("exp"), torch.log: _unary("log"),
        torch.sqrt: _unary("sqrt"), torch.rsqrt: _unary("rsqrt"), torch.abs: _unary("abs"),
        torch.neg: _unary("neg"), operator.neg: _unary("neg"), torch.erf: _unary("erf"),
        F.gelu: _gelu, F.silu: _silu, F.hardswish: _unary("hard_swish"),
        F.leaky_relu: _leaky, F.relu6: _hardtanh(0.0, 6.0), F.hardtanh: _hardtanh(-1.0, 1.0),
        torch.clamp: _clamp, torch.clip: _clamp,
        torch.softmax: _softmax("softmax"), F.softmax: _softmax("softmax"),
        F.log_softmax: _softmax("log_softmax"), torch.log_softmax: _softmax("log_softmax"),
        torch.flatten: _reshape, torch.reshape: _reshape,
        torch.cat: _cat, torch.permute: _permute, torch.transpose: _transpose,
        torch.mean: _mean("reduce_mean"), torch.sum: _mean("reduce_sum"),
        F.adaptive_avg_pool2d: _adaptive, F.adaptive_avg_pool1d: _adaptive,
        F.dropout: _identity, F.linear: _functional_linear,
        F.layer_norm: _functional_layer_norm, torch.chunk: _split, torch.split: _split, operator.getitem: _getitem,
        F.max_pool2d: _functional_pool("max_pool"), F.avg_pool2d: _functional_pool("avg_pool"),
        F.max_pool1d: _functional_pool("max_pool"), F.avg_pool1d: _functional_pool("avg_pool"),
    }
    try:
        from torchvision.ops import stochastic_depth
        functions[stochastic_depth] = _stochastic_depth
    except ImportError:
        pass
    methods = {
        "view": _reshape, "reshape": _reshape, "flatten": _reshape, "squeeze": _reshape,
        "unsqueeze": _reshape, "contiguous": _identity,
        "permute": _permute, "transpose": _transpose,
        "relu": _unary("relu"), "sigmoid": _unary("sigmoid"), "tanh": _unary("tanh"),
        "exp": _unary("exp"), "softmax": _softmax("softmax"),
        "mean": _mean("reduce_mean"), "sum": _mean("reduce_sum"),
        "add": _binary("add"), "mul": _binary("mul"), "sub": _binary("sub"),
        "div": _binary("div"), "matmul": _binary("matmul"),
        "chunk": _split, "split": _split, "expand": _expand,
    }
    return modules, functions, methods


