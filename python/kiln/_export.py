"""kiln.from_torch through torch.export (torch 2.x): core ATen onto Kiln.

torch.export.export runs the module under FakeTensors, with the
dynamic_shapes it is given, and run_decompositions() lowers the program to
core ATen ops, each node carrying its result's dtype and shape (symbolic
sizes as sympy expressions over torch's own symbols) in meta["val"]. Each
ATen call maps onto Kiln's op table through the rows of _rows() below,
written with kiln._fx's _Writer: parameters, buffers and constants become
blobs named after their module path, a size attribute that torch computes
from a symbol (a view's [s0*s1, 64]) becomes the same expression over the
Dim's name, and every node's result dims that are symbolic are written
`?` for Kiln's own shape inference to fill (Note [Unknown dims in recorded
types] in ir/Builder.cpp). Each node's location is the innermost frame of
its stack trace in the model's source. Every ATen op without a row is
listed at once, with its location, in one kiln.Error.
"""

import operator
import os

from ._fx import (_END, _Downstream, _Expr, _Unsupported, _Writer, _blob_name, _error,
                  _load_text, _location)


def capture(torch, module, examples, spec, load):
    """The Model of `module` captured by torch.export; `spec` as
    kiln.from_torch takes it (None: static)."""
    from torch.export import Dim

    name = type(module).__name__
    dims = []  # (input index, dim, symbol name)
    export_spec = None
    if spec is not None:
        from ._dynamic import _dims
        found = _dims(_arg_names(module, examples), examples, spec,
                      f"from_torch: dynamic_shapes of {name}", _error)
        dims = [(i, d, s) for i, d, s, *_ in found]
        made = {}  # a name given as a string: one Dim per name
        export_spec = [{} for _ in examples]
        for i, d, s, _, _, dim in found:
            export_spec[i][d] = made.setdefault(s, Dim(s)) if isinstance(dim, str) else dim
        export_spec = tuple(per or None for per in export_spec)
        # torch.export specializes a size of 0 or 1: such an example dim is
        # repeated to 2 (the Model is the same; the example only traces it).
        from ._dynamic import _resize
        examples = list(examples)
        for i, d, _ in dims:
            if examples[i].shape[d] < 2:
                examples[i] = _resize(torch, examples[i], d, 2)
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            ep = torch.export.export(module, tuple(examples), dynamic_shapes=export_spec)
            ep = ep.run_decompositions()
    except Exception as e:
        # torch's first line, then why (its guards) and its suggested fixes.
        lines = [x.strip() for x in str(e).strip().splitlines() if x.strip()]
        at = next((k for k, x in enumerate(lines) if x.startswith("Suggested fixes")), None)
        hint = [x for x in lines if x.startswith("- Not all values")][:3] + (
            lines[at:at + 4] if at is not None else [])
        raise _error(f"from_torch: torch.export cannot capture {name}: {type(e).__name__}: "
                     + "\n  ".join((lines[:1] or [""]) + hint)) from e
    finally:
        module.train(was_training)
    return _load_text(_convert(torch, ep, name, dims), name, load)


def _arg_names(module, examples):
    import inspect
    try:
        params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        params = []
    return (params + [f"arg{i}" for i in range(len(params), len(examples))])[:len(examples)]


def _convert(torch, ep, name, dims):
    sig = ep.graph_signature
    graph = ep.graph_module.graph
    consts = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,  # placeholder -> its path
              **getattr(sig, "inputs_to_lifted_tensor_constants", {})}
    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}) or {})
    w = _Writer(torch)
    symbols = {}  # torch's symbol (s0) -> the Dim's name
    user = [n for n in graph.nodes if n.op == "placeholder" and n.name not in consts]
    for i, d, s in dims:
        size = user[i].meta["val"].shape[d]
        if isinstance(size, torch.SymInt):
            symbols[str(size.node.expr)] = s
    names, missing, inputs = {}, [], []
    for n in user:
        names[n] = f"%{n.name}"
        val = n.meta["val"]
        inputs.append((names[n], (w.type_of(val)[0],
                                  [_dim_text(torch, d, symbols) for d in val.shape])))
    skip = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep)
    rows = _rows(torch)
    c = _Context(torch, w, names, symbols, consts, state)
    by_name = {x.name: x for x in graph.nodes}
    outputs = []
    for n in graph.nodes:
        w.loc = _location(n, skip, innermost_first=False)
        if n.op == "placeholder":
            continue
        if n.op == "output":
            for o in sig.user_outputs:
                if missing:
                    break
                if o not in by_name or by_name[o] not in names:
                    raise _error(f"from_torch: {name} returns something other than a "
                                 f"computed tensor ({o})")
                outputs.append((names[by_name[o]], w.type_of(by_name[o].meta["val"])))
            continue
        target = n.target
        label = target.name() if callable(getattr(target, "name", None)) else str(target)
        val = n.meta.get("val")
        if target is operator.getitem:
            parts = names.get(n.args[0])
            if isinstance(parts, list):
                if parts[n.args[1]] is None:
                    missing.append((f"{label} of an unused result", w.loc.strip()))
                else:
                    names[n] = parts[n.args[1]]
            continue
        if isinstance(val, (torch.SymInt, int, torch.SymBool, bool)):
            continue  # a size or a size check: its users read it through c.arg
        if val is None and not n.users:
            continue  # torch's run-time assertions (_assert_scalar, ...): not checked here
        rule = rows.get(target) or rows.get(getattr(target, "overloadpacket", None))
        if rule is None:
            missing.append((label, w.loc.strip()))
            continue
        try:
            names[n] = rule(c, n)
        except _Downstream:
            if not missing:  # an operand no row made: a bug of a row
                missing.append((f"{label} (an operand has no value)", w.loc.strip()))
        except Exception as e:  # _Unsupported, or a row meeting arguments it cannot read
            why = str(e) if isinstance(e, _Unsupported) else f"{type(e).__name__}: {e}"
            missing.append((f"{label} ({why})", w.loc.strip()))
    if missing:
        counts = {}
        for m in missing:
            counts[m] = counts.get(m, 0) + 1
        raise _error(f"from_torch: Kiln cannot take {len(missing)} call" +
                     ("" if len(missing) == 1 else "s") + " (torch.export, core ATen):\n" +
                     "\n".join(f"  {t} at {loc}" + (f" ({k} calls)" if k > 1 else "")
                               for (t, loc), k in counts.items()))
    if symbols:  # torch may prove a size Kiln writes as min(S,4): inference decides
        w.nodes = [node if node[1] == "constant" else
                   node[:4] + ([(t[0], ["?"] * len(t[1])) for t in node[4]],) + node[5:]
                   for node in w.nodes]
    return w.render(name, inputs, [v for v, _ in outputs],
                    [(t[0], ["?"] * len(t[1]) if symbols else t[1]) for _, t in outputs])


def _dim_text(torch, d, symbols):
    if isinstance(d, int):
        return d
    return _sym_text(d.node.expr, symbols)


def _sym_text(expr, symbols):
    """A sympy expression of torch's shape environment in Kiln's dim
    grammar (docs/IR.md), its symbols renamed to the Dims' names. Every
    compound is bracketed whole: Kiln reads a term left to right, so
    16*((W)/16) must not become 16*(W)/16."""
    import sympy
    from torch.utils._sympy import functions as fns

    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        if str(expr) not in symbols:
            raise _Unsupported(f"a size from the data ({expr})")
        return symbols[str(expr)]
    args = [_sym_text(a, symbols) for a in expr.args]
    const = [a.is_Integer and int(a) > 0 for a in expr.args]

    def of(*names):
        return any(isinstance(expr, getattr(fns, n)) for n in names if hasattr(fns, n))

    if isinstance(expr, sympy.Add):
        return "(" + "+".join(args) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + "*".join(args) + ")"
    if isinstance(expr, sympy.Pow) and expr.args[1].is_Integer and 0 < int(expr.args[1]) <= 8:
        return "(" + "*".join([args[0]] * int(expr.args[1])) + ")"
    if of("Identity") and len(args) == 1:
        return args[0]
    if of("FloorDiv") and const[1]:  # CleanDiv is a FloorDiv
        return f"(({args[0]})/{args[1]})"
    if of("CeilDiv") and const[1]:
        return f"(({args[0]}+{int(expr.args[1]) - 1})/{args[1]})"
    if (isinstance(expr, sympy.Mod) or of("Mod", "PythonMod")) and const[1]:
        return f"mod({args[0]},{args[1]})"
    if isinstance(expr, (sympy.Max, sympy.Min)) or of("Max", "Min"):
        name = "max" if "Max" in type(expr).__name__ else "min"
        text = args[0]
        for a in args[1:]:
            text = f"{name}({text},{a})"
        return text
    raise _Unsupported(f"the size expression {expr}")


class _Context:
    """What a row sees: w the writer, arg(a) an operand's kir value (a size
    as an int or expression, a Python value as itself), val(node) the
    node's meta value, const(node) a parameter or buffer's tensor."""

    def __init__(self, torch, w, names, symbols, consts, state):
        self.torch, self.w, self.names, self.symbols = torch, w, names, symbols
        self.consts, self.state = consts, state

    def arg(self, a):
        torch = self.torch
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(x) for x in a)
        if not hasattr(a, "op"):  # not an fx node
            return a
        if a in self.names:
            return self.names[a]
        if a.name in self.consts:
            fqn = self.consts[a.name]
            self.names[a] = self.w.const(self.state[fqn], _blob_name(fqn))
            return self.names[a]
        val = a.meta.get("val")
        if isinstance(val, torch.SymInt):
            if isinstance(val.node.expr, int) or val.node.expr.is_Integer:
                return int(val.node.expr)
            return _Expr(_sym_text(val.node.expr, self.symbols))
        if isinstance(val, (int, float, bool)):
            return val
        raise _Downstream()

    def size(self, d):
        """A size attribute: an int, or the expression of a symbolic one."""
        if isinstance(d, int):
            return d
        if isinstance(d, self.torch.SymInt):
            return _Expr(_sym_text(d.node.expr, self.symbols))
        return self.arg(d)

    def shape(self, t):
        """A shape attribute for tensor type `t`: its sizes or expressions."""
        return [self.size(d) for d in t.shape]

    def val(self, a):
        return a.meta["val"]

    def tensor(self, a, like):
        """An operand as a kir value; a Python scalar as a constant of
        `like`'s dtype."""
        v = self.arg(a)
        if isinstance(v, str) and not isinstance(v, _Expr):
            return v
        if isinstance(v, _Expr):
            raise _Unsupported("a symbolic size used as a tensor")
        return self.w.const(self.torch.tensor(v, dtype=like.dtype))


def _opt(n, i, name, default):
    if len(n.args) > i:
        return n.args[i]
    return n.kwargs.get(name, default)


def _rank(c, n):
    return len(c.val(n).shape)


def _unary(kind, **attrs):
    return lambda c, n: c.w.op(kind, [c.arg(n.args[0])], c.val(n), attrs or None)


def _binary(kind):
    def rule(c, n):
        if _opt(n, 2, "alpha", 1) != 1:
            raise _Unsupported("alpha")
        if n.kwargs.get("rounding_mode") is not None:
            raise _Unsupported(f"rounding_mode {n.kwargs['rounding_mode']!r}")
        res = c.val(n)
        return c.w.op(kind, [c.tensor(n.args[0], res), c.tensor(n.args[1], res)], res)
    return rule


def _identity(c, n):
    return c.arg(n.args[0])


def _conv(c, n):
    x, wt, b, stride, pad, dil, transposed, out_pad, groups = (c.arg(a) for a in n.args[:9])
    attrs = {"strides": list(stride), "pads": list(pad) * 2, "dilations": list(dil),
             "group": int(groups)}
    ops = [x, wt] + ([b] if b is not None else [])
    if transposed:
        attrs["output_padding"] = list(out_pad)
        return c.w.op("conv_transpose", ops, c.val(n), attrs)
    return c.w.op("conv", ops, c.val(n), attrs)


def _addmm(c, n):
    if _opt(n, 3, "beta", 1) != 1 or _opt(n, 4, "alpha", 1) != 1:
        raise _Unsupported("alpha or beta")
    bias, a, b = (c.arg(x) for x in n.args[:3])
    return c.w.op("gemm", [a, b, bias], c.val(n))


def _matmul(c, n):
    return c.w.op("matmul", [c.arg(n.args[0]), c.arg(n.args[1])], c.val(n))


def _permute(c, n):
    rank = _rank(c, n)
    return c.w.op("transpose", [c.arg(n.args[0])], c.val(n),
                  {"perm": [d % rank for d in n.args[1]]})


def _reshape(c, n):
    return c.w.op("reshape", [c.arg(n.args[0])], c.val(n),
                  {"shape": c.shape(c.val(n))})


def _expand(c, n):
    return c.w.op("expand", [c.arg(n.args[0])], c.val(n),
                  {"shape": c.shape(c.val(n))})


def _to_copy(c, n):
    src, res = c.val(n.args[0]), c.val(n)
    if res.dtype == src.dtype:
        return c.arg(n.args[0])
    return c.w.op("cast", [c.arg(n.args[0])], res, {"to": _Expr(c.w.type_of(res)[0])})


def _batch_norm(c, n):
    x, wt, b, mean, var = (c.arg(a) for a in n.args[:5])
    eps = n.args[6] if len(n.args) > 6 else n.kwargs["eps"]
    if wt is None or b is None:
        raise _Unsupported("batch_norm without affine parameters")
    y = c.w.op("batch_norm", [x, wt, b, mean, var], c.val(n)[0], {"epsilon": float(eps)})
    return [y, None, None]


def _layer_norm(c, n):
    x, shape, wt, b, eps = (c.arg(a) for a in n.args[:5])
    if wt is None:
        raise _Unsupported("layer_norm without a weight")
    y = c.w.op("layer_norm", [x, wt] + ([b] if b is not None else []), c.val(n)[0],
               {"axis": -len(shape), "epsilon": float(eps)})
    return [y, None, None]


def _per_dim(v, rank):
    """A pool's int or int list argument as one value per spatial dim."""
    v = [v] if isinstance(v, int) else list(v)
    return v * rank if len(v) == 1 else v


def _window(c, n):
    """A pool's (input, kernel, stride, padding) as the kernel, strides and
    pads of Kiln's pools (stride [] means the kernel)."""
    rank = len(c.val(n.args[0]).shape) - 2
    k = _per_dim(n.args[1], rank)
    return rank, {"kernel": k, "strides": _per_dim(_opt(n, 2, "stride", []) or k, rank),
                  "pads": _per_dim(_opt(n, 3, "padding", 0), rank) * 2}


def _max_pool(c, n):
    rank, attrs = _window(c, n)
    attrs.update(dilations=_per_dim(_opt(n, 4, "dilation", 1), rank),
                 ceil_mode=bool(_opt(n, 5, "ceil_mode", False)))
    return [c.w.op("max_pool", [c.arg(n.args[0])], c.val(n)[0], attrs), None]


def _avg_pool(c, n):
    if _opt(n, 6, "divisor_override", None):
        raise _Unsupported("divisor_override")
    _, attrs = _window(c, n)
    attrs.update(ceil_mode=bool(_opt(n, 4, "ceil_mode", False)),
                 count_include_pad=bool(_opt(n, 5, "count_include_pad", True)))
    return c.w.op("avg_pool", [c.arg(n.args[0])], c.val(n), attrs)


def _adaptive_avg(c, n):
    src, res = c.val(n.args[0]), c.val(n)
    out, size = list(res.shape[2:]), list(src.shape[2:])
    if all(isinstance(o, int) and o == 1 for o in out):
        return c.w.op("global_avg_pool", [c.arg(n.args[0])], res)
    if all(isinstance(s, int) and isinstance(o, int) and s % o == 0 for s, o in zip(size, out)):
        k = [s // o for s, o in zip(size, out)]
        return c.w.op("avg_pool", [c.arg(n.args[0])], res, {"kernel": k, "strides": k})
    raise _Unsupported(f"output size {out} of input size {size}")


def _reduce(kind):
    def rule(c, n):
        rank = len(c.val(n.args[0]).shape)
        dims = _opt(n, 1, "dim", None)
        dims = [dims] if isinstance(dims, int) else dims
        dims = list(range(rank)) if not dims else [d % rank for d in dims]  # []: all
        return c.w.op(kind, [c.arg(n.args[0])], c.val(n),
                      {"axes": dims, "keepdims": bool(_opt(n, 2, "keepdim", False))})
    return rule


def _softmax(kind):
    def rule(c, n):
        return c.w.op(kind, [c.arg(n.args[0])], c.val(n), {"axis": n.args[1] % _rank(c, n)})
    return rule


def _cat(c, n):
    return c.w.op("concat", list(c.arg(n.args[0])), c.val(n),
                  {"axis": _opt(n, 1, "dim", 0) % _rank(c, n)})


def _slice(c, n):
    dim = _opt(n, 1, "dim", 0) % _rank(c, n)
    start, end, step = _opt(n, 2, "start", None), _opt(n, 3, "end", None), _opt(n, 4, "step", 1)
    start = 0 if start is None else c.size(start)
    end = _END if end is None else c.size(end)
    if isinstance(end, int) and end >= 2**62:
        end = _END
    return c.w.op("slice", [c.arg(n.args[0])], c.val(n),
                  {"starts": [start], "ends": [end], "axes": [dim], "steps": [int(step)]})


class _Like:
    """A result type for the writer: a dtype and a shape ("?" where unknown)."""

    def __init__(self, dtype, shape):
        self.dtype, self.shape = dtype, shape


def _select(c, n):
    src = c.val(n.args[0])
    dim, i = n.args[1] % len(src.shape), c.size(n.args[2])
    shape = _shape(src)
    shape[dim] = 1 if shape[dim] != "?" else "?"  # Kiln's min(S,1) over a symbolic dim
    end = _END if i == -1 else (i + 1 if isinstance(i, int) else _Expr(f"{i}+1"))
    part = c.w.op("slice", [c.arg(n.args[0])], _Like(src.dtype, shape),
                  {"starts": [i], "ends": [end], "axes": [dim], "steps": [1]})
    return c.w.op("reshape", [part], c.val(n), {"shape": c.shape(c.val(n))})


def _split(c, n):
    res = c.val(n)
    dim = _opt(n, 2, "dim", 0) % len(res[0].shape)
    sizes = [r.shape[dim] for r in res]
    if not all(isinstance(s, int) for s in sizes):
        raise _Unsupported("a split of a symbolic dim")
    return c.w.op_multi("split", [c.arg(n.args[0])], list(res), {"axis": dim, "sizes": sizes})


def _clamp(c, n):
    lo, hi = _opt(n, 1, "min", None), _opt(n, 2, "max", None)
    if not all(isinstance(b, (int, float, type(None))) for b in (lo, hi)):
        raise _Unsupported("tensor bounds")
    return c.w.op("clip", [c.arg(n.args[0])], c.val(n),
                  {"min": float("-inf") if lo is None else float(lo),
                   "max": float("inf") if hi is None else float(hi)})


def _hardtanh(c, n):
    return c.w.op("clip", [c.arg(n.args[0])], c.val(n),
                  {"min": float(_opt(n, 1, "min_val", -1.0)),
                   "max": float(_opt(n, 2, "max_val", 1.0))})


def _gelu(c, n):
    return c.w.op("gelu", [c.arg(n.args[0])], c.val(n),
                  {"approximate": n.kwargs.get("approximate", "none")})


def _leaky(c, n):
    return c.w.op("leaky_relu", [c.arg(n.args[0])], c.val(n),
                  {"alpha": float(_opt(n, 1, "negative_slope", 0.01))})


def _embedding(c, n):
    return c.w.op("gather", [c.arg(n.args[0]), c.arg(n.args[1])], c.val(n), {"axis": 0})


def _where(c, n):
    res = c.val(n)
    return c.w.op("where", [c.arg(n.args[0]), c.tensor(n.args[1], res),
                            c.tensor(n.args[2], res)], res)


def _pow(c, n):
    res = c.val(n)
    return c.w.op("pow", [c.tensor(n.args[0], res), c.tensor(n.args[1], res)], res)


def _compare(kind):
    def rule(c, n):
        a, b = c.val(n.args[0]), n.args[1]
        if not hasattr(b, "op") and c.torch.result_type(a, b) != a.dtype:
            raise _Unsupported(f"a {type(b).__name__} scalar against a {a.dtype} tensor")
        if hasattr(b, "op") and c.val(b).dtype != a.dtype:
            raise _Unsupported("operands of two dtypes")
        return c.w.op(kind, [c.arg(n.args[0]), c.tensor(b, a)], c.val(n))
    return rule


def _any(c, n):
    """any of a bool tensor over dims: the max of it as 0/1 floats, > 0."""
    src = c.val(n.args[0])
    if src.dtype != c.torch.bool:  # any(-1.0) is True: max > 0 only holds for bool
        raise _Unsupported(f"any of a {src.dtype} tensor")
    rank = len(src.shape)
    dims = _opt(n, 1, "dim", None)
    dims = list(range(rank)) if dims is None else [
        d % rank for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
    res = c.val(n)
    as_float = c.w.op("cast", [c.arg(n.args[0])], _Like(c.torch.float32, _shape(src)),
                      {"to": _Expr("f32")})
    top = c.w.op("reduce_max", [as_float], _Like(c.torch.float32, _shape(res)),
                 {"axes": dims, "keepdims": bool(_opt(n, 2, "keepdim", False))})
    zero = c.w.const(c.torch.tensor(0.0))
    return c.w.op("greater", [top, zero], res)


def _shape(t):
    return [s if isinstance(s, int) else "?" for s in t.shape]


def _fill(c, n):
    """full(size, value) and full_like(x, value): the value expanded."""
    res = c.val(n)
    value = c.w.const(c.torch.tensor(n.args[1], dtype=res.dtype))
    return c.w.op("expand", [value], res, {"shape": c.shape(res)})


def _as_strided(c, n):
    """as_strided that only restates a contiguous layout (the strides of
    size-1 dims are free): a reshape; any other view is unsupported."""
    size, stride = list(n.args[1]), list(n.args[2])
    offset = _opt(n, 3, "storage_offset", 0)
    want, step = [], 1
    for s in reversed(size):
        want.append(step)
        step *= s if isinstance(s, int) else 0
    want.reverse()
    src = c.val(n.args[0])  # as_strided reads the storage: the operand must be it
    if offset or any(s != 1 and st != w for s, st, w in zip(size, stride, want)) or \
            not all(isinstance(s, int) for s in size) or not src.is_contiguous() or \
            src.storage_offset() != 0:
        raise _Unsupported("a strided view that is not contiguous")
    return _reshape(c, n)


def _constant_pad(c, n):
    """constant_pad_nd's pad lists (begin, end) pairs from the last dim."""
    rank = len(c.val(n.args[0]).shape)
    pad = list(n.args[1])
    begins, ends = [0] * rank, [0] * rank
    for k in range(len(pad) // 2):
        begins[rank - 1 - k], ends[rank - 1 - k] = pad[2 * k], pad[2 * k + 1]
    if any(not isinstance(p, int) or p < 0 for p in begins + ends):
        raise _Unsupported("a negative or symbolic pad")
    return c.w.op("pad", [c.arg(n.args[0])], c.val(n),
                  {"pads": begins + ends, "value": float(_opt(n, 2, "value", 0.0))})


def _logic(kind):
    def rule(c, n):
        return c.w.op(kind, [c.arg(n.args[0]), c.arg(n.args[1])], c.val(n))
    return rule


def _bitwise(logical, bitwise):
    """&, |, ^: logical on bool tensors, bitwise on integers."""
    def rule(c, n):
        res = c.val(n)
        kind = logical if res.dtype == c.torch.bool else bitwise
        return c.w.op(kind, [c.tensor(n.args[0], res), c.tensor(n.args[1], res)], res)
    return rule


def _not_equal(c, n):
    """a != b as not(a == b): NaN != x holds, as torch has it."""
    eq = _compare("equal")(c, n)
    return c.w.op("not", [eq], c.val(n))


def _or_equal(kind):
    """a <= b as (a < b) or (a == b): false for NaN, as torch has it."""
    def rule(c, n):
        strict = _compare(kind)(c, n)
        return c.w.op("or", [strict, _compare("equal")(c, n)], c.val(n))
    return rule


def _scalar_tensor(c, n):
    return c.w.const(c.torch.tensor(n.args[0], dtype=c.val(n).dtype))


def _arange(c, n):
    """arange(start, end, step) as iota, its length torch's (may be symbolic)."""
    res = c.val(n)
    start = n.args[0] if len(n.args) > 1 else 0
    step = _opt(n, 2, "step", 1)
    if not all(isinstance(v, (int, float)) for v in (start, step)):
        raise _Unsupported("a start or step computed from a size")
    return c.w.op("iota", [], res, {"shape": [c.size(res.shape[0])], "start": float(start),
                                    "delta": float(step), "dtype": _Expr(c.w.type_of(res)[0])})


def _upsample(mode):
    """upsample_{nearest,bilinear}2d.vec: torch's nearest is ONNX's
    asymmetric / floor; bilinear is pytorch_half_pixel, or align_corners."""
    def rule(c, n):
        res = c.val(n)
        attrs = {"mode": mode}
        if mode == "nearest":  # (input, output_size, scale_factors)
            scales = _opt(n, 2, "scale_factors", None)
            attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        else:  # (input, output_size, align_corners, scale_factors)
            scales = _opt(n, 3, "scale_factors", None)
            attrs["coordinate_transformation_mode"] = (
                "align_corners" if _opt(n, 2, "align_corners", False) else "pytorch_half_pixel")
        if scales:
            attrs["scales"] = [1.0, 1.0] + [float(x) for x in scales]
        elif all(isinstance(d, int) for d in res.shape):
            attrs["sizes"] = list(res.shape)
        else:
            raise _Unsupported("an output size of a symbolic dim")
        return c.w.op("resize", [c.arg(n.args[0])], res, attrs)
    return rule


def _flip(c, n):
    src = c.val(n.args[0])
    rank = len(src.shape)
    dims = [d % rank for d in n.args[1]]
    if not all(isinstance(src.shape[d], int) for d in dims):
        raise _Unsupported("a flip of a symbolic dim")
    return c.w.op("slice", [c.arg(n.args[0])], c.val(n), {
        "starts": [-1] * len(dims), "ends": [-_END] * len(dims), "axes": dims,
        "steps": [-1] * len(dims)})


def _rows(torch):
    """ATen op (overload packet) -> row."""
    aten = torch.ops.aten
    return {
        aten.convolution: _conv, aten.addmm: _addmm, aten.mm: _matmul, aten.bmm: _matmul,
        aten.permute: _permute, aten.view: _reshape, aten._unsafe_view: _reshape,
        aten.reshape: _reshape, aten.unsqueeze: _reshape, aten.squeeze: _reshape,
        aten.expand: _expand, aten.clone: _identity, aten.alias: _identity,
        aten._to_copy: _to_copy, aten.detach: _identity,
        aten.add: _binary("add"), aten.sub: _binary("sub"), aten.mul: _binary("mul"),
        aten.div: _binary("div"), aten.relu: _unary("relu"), aten.sigmoid: _unary("sigmoid"),
        aten.tanh: _unary("tanh"), aten.exp: _unary("exp"), aten.log: _unary("log"),
        aten.sqrt: _unary("sqrt"), aten.rsqrt: _unary("rsqrt"), aten.neg: _unary("neg"),
        aten.abs: _unary("abs"), aten.erf: _unary("erf"), aten.reciprocal: _unary("reciprocal"),
        aten.gelu: _gelu, aten.hardtanh: _hardtanh, aten.clamp: _clamp, aten.leaky_relu: _leaky,
        aten.hardswish: _unary("hard_swish"),
        aten.hardsigmoid: _unary("hard_sigmoid", alpha=1.0 / 6.0, beta=0.5),
        aten._native_batch_norm_legit_no_training: _batch_norm,
        aten.native_layer_norm: _layer_norm, aten.max_pool2d_with_indices: _max_pool,
        aten.avg_pool2d: _avg_pool, aten._adaptive_avg_pool2d: _adaptive_avg,
        aten.mean: _reduce("reduce_mean"), aten.sum: _reduce("reduce_sum"),
        aten.amax: _reduce("reduce_max"),
        aten._softmax: _softmax("softmax"), aten._log_softmax: _softmax("log_softmax"),
        aten.cat: _cat, aten.slice: _slice, aten.select: _select,
        aten.split_with_sizes: _split, aten.split: _split, aten.embedding: _embedding,
        aten.where: _where, aten.pow: _pow, aten.eq: _compare("equal"),
        aten.gt: _compare("greater"), aten.lt: _compare("less"),
        aten.as_strided: _as_strided, aten.constant_pad_nd: _constant_pad,
        aten.logical_not: _unary("not"), aten.any: _any, aten.full_like: _fill,
        aten.ne: _not_equal, aten.le: _or_equal("less"), aten.ge: _or_equal("greater"),
        aten.logical_and: _logic("and"), aten.logical_or: _logic("or"), aten.full: _fill,
        aten.bitwise_and: _bitwise("and", "bitwise_and"),
        aten.bitwise_or: _bitwise("or", "bitwise_or"),
        aten.scalar_tensor: _scalar_tensor, aten.arange: _arange, aten.flip: _flip,
        aten.upsample_nearest2d: _upsample("nearest"),
        aten.upsample_bilinear2d: _upsample("linear"),
    }
