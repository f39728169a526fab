"""kiln.from_torch with dynamic dims: symbolic sizes from sample traces.

torch.fx records Python values (sizes, shapes, slice bounds) as the numbers
of one run, so one trace cannot say which of them follow a dynamic dim.

Note [Dynamic dims by sampling]: the module is captured at several sizes
of its dynamic dims and the records compared:

- every symbol S gets three sample sizes within the symbol's
  torch.export.Dim range, each at least 2 (a size of 1 broadcasts, and
  torch.export specializes it too): the example's and a multiple of it
  for the corners, and a neighbour that is not a multiple to check;
- the module is captured at each corner of the first two sizes of every
  symbol (2**k runs for k symbols) and once at the third sizes of all;
- the graphs must match node for node; an integer attribute that differs is
  solved, from the corners, as a sum of products of the symbols with integer
  coefficients (`B*S`, `2*S+1`) and checked at the last run; anything else
  that differs (a float attribute, a constant's data, the graph's structure)
  is an error that names the node's location;
- the graph's input dims become the symbols, and every node's result dims
  are written `?`, which the parser fills with Kiln's own shape inference
  (Note [Unknown dims in recorded types] in ir/Builder.cpp).
"""

import math
import re
from fractions import Fraction

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = {"min", "max", "mod"}
_MAX_SYMBOLS = 4


def capture_symbolic(torch, module, placeholders, examples, spec, capture, error):
    """The .kir text of `module` with the dims of `spec` symbolic."""
    where = f"from_torch: dynamic_shapes of {type(module).__name__}"
    dyn = _dims([n.target for n in placeholders], examples, spec, where, error)
    symbols = {}  # name -> [example size, lo, hi]
    for i, d, name, lo, hi, _ in dyn:
        size = int(examples[i].shape[d])
        old = symbols.setdefault(name, [size, lo, hi])
        old[1], old[2] = max(old[1], lo), min(old[2], hi)
    if len(symbols) > _MAX_SYMBOLS:
        raise error(f"{where}: {len(symbols)} symbols; at most {_MAX_SYMBOLS} (each doubles the "
                    "captures)")
    names = list(symbols)
    levels = {s: _levels(s, *symbols[s], where, error) for s in names}
    points = [{s: levels[s][(m >> j) & 1] for j, s in enumerate(names)}
              for m in range(1 << len(names))]
    points.append({s: levels[s][2] for s in names})
    runs = []
    for p in points:
        inputs = list(examples)
        for i, d, name, *_ in dyn:
            inputs[i] = _resize(torch, inputs[i], d, p[name])
        runs.append(capture(tuple(inputs)))

    def at(p):
        return ", ".join(f"{s}={p[s]}" for s in names)

    w, ins, outs = runs[0]
    for r, p in zip(runs[1:], points[1:]):
        if len(r[0].nodes) != len(w.nodes) or [v for v, _ in r[2]] != [v for v, _ in outs]:
            first = next((a for a, b in zip(w.nodes, r[0].nodes) if a[:3] != b[:3]),
                         w.nodes[-1] if w.nodes else None)
            raise error(f"{where}: the graph differs between sizes ({at(points[0])} and {at(p)})"
                        f", first at {first[5].strip() if first else 'its outputs'}: Python code "
                        "that branches on a size is captured for one size only")
    nodes = []
    for k, node in enumerate(w.nodes):
        vs, op, operands, attrs, types, loc = node
        others = [r[0].nodes[k] for r in runs[1:]]
        place = f"'{op}' at {loc.strip()}"
        for o, p in zip(others, points[1:]):
            if o[:3] != node[:3] or list(o[3]) != list(attrs) or \
                    [(t[0], len(t[1])) for t in o[4]] != [(t[0], len(t[1])) for t in types]:
                raise error(f"{where}: {place} differs between sizes ({at(points[0])} and "
                            f"{at(p)}): Python code that branches on a size is captured for "
                            "one size only")
        if op == "constant":
            blob = attrs["@"]
            for o, r, p in zip(others, runs[1:], points[1:]):
                if o[4] != types or r[0].blobs[blob] != w.blobs[blob]:
                    raise error(f"{where}: the constant at {loc.strip()} depends on the sizes "
                                f"({at(points[0])} and {at(p)}): Kiln takes it as data of "
                                "one size; compute it from a tensor in the module instead")
            nodes.append(node)
            continue
        solved = {}
        for key, value in attrs.items():
            samples = [value] + [o[3][key] for o in others]
            solved[key] = _generalize(samples, points, names,
                                      f"{place}: attribute '{key}'", error)
        nodes.append((vs, op, operands, solved, [(t[0], ["?"] * len(t[1])) for t in types], loc))
    w.nodes = nodes
    symbol_of = {(i, d): name for i, d, name, *_ in dyn}
    inputs = [(v, (t[0], [symbol_of.get((i, d), n) for d, n in enumerate(t[1])]))
              for i, (v, t) in enumerate(ins)]
    return w.render(type(module).__name__, inputs, [v for v, _ in outs],
                    [(t[0], ["?"] * len(t[1])) for _, t in outs])


def _dims(argnames, examples, spec, where, error):
    """(input index, dim, symbol, lo, hi, the Dim as given) for each dynamic
    dim of `spec`, given as torch.export takes it: per input (a sequence in
    input order, or a dict by the forward's parameter names `argnames`)
    None, or a dict {dim: Dim} or a sequence of Dim/None per dim, a Dim
    being a torch.export.Dim or a symbol's name."""
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in argnames]
        if unknown:
            raise error(f"{where}: no input named {unknown[0]!r} (the inputs: "
                        f"{', '.join(argnames)})")
        spec = [spec.get(a) for a in argnames]
    if not isinstance(spec, (list, tuple)) or len(spec) != len(examples):
        raise error(f"{where}: give one entry per input ({len(examples)}), in order or by name")
    dyn = []
    for i, s in enumerate(spec):
        if s is None:
            continue
        rank = examples[i].dim()
        items = s.items() if isinstance(s, dict) else enumerate(s)
        for d, dim in items:
            if dim is None:
                continue
            if not isinstance(d, int) or not -rank <= d < rank:
                raise error(f"{where}: input {i} ('{argnames[i]}') has {rank} dims; no dim {d!r}")
            d %= rank
            name = dim if isinstance(dim, str) else getattr(dim, "__name__", None)
            if not isinstance(name, str) or not _NAME.match(name) or name in _RESERVED:
                raise error(f"{where}: input {i} dim {d}: {dim!r} is not a named dim; give "
                            "torch.export.Dim('batch') or a name such as 'batch'")
            lo = getattr(dim, "min", 0)
            hi = getattr(dim, "max", None)
            lo = lo if isinstance(lo, int) else 0
            hi = hi if isinstance(hi, int) and hi < 2**62 else 2**62
            size = int(examples[i].shape[d])
            if not lo <= size <= hi:
                raise error(f"{where}: input {i} dim {d} is {size} in the example, outside "
                            f"{name}'s range [{lo}, {hi}]")
            dyn.append((i, d, name, lo, hi, dim))
    if not dyn:
        raise error(f"{where}: no dim is dynamic")
    sizes = {}
    for i, d, name, *_ in dyn:
        size = int(examples[i].shape[d])
        if sizes.setdefault(name, size) != size:
            raise error(f"{where}: '{name}' is {sizes[name]} in one example input and "
                        f"{size} in input {i} dim {d}; a symbol is one size")
    return dyn


def _levels(name, size, lo, hi, where, error):
    """Three sample sizes of a symbol, at least 2 and within [lo, hi]: two
    for the corners (the example's, then its multiples, so that a model
    that needs a multiple of the example's size runs there), and a check
    size that is not a multiple of the first (a neighbour), so that
    `S//16*16` or `S % 4` does not pass for `S`."""
    base = max(size, lo, 2)
    ok = [v for v in [base, 2 * base, 3 * base] + [base + k for k in (1, -1, 2, -2, 3, -3)]
          if max(lo, 2) <= v <= hi]
    corners = list(dict.fromkeys(ok))[:2]
    check = [v for v in ok if v not in corners and v % corners[0] and corners[0] % v] \
        if corners else []
    if len(corners) < 2 or not check:
        raise error(f"{where}: '{name}' can take fewer than three sizes of at least 2 near the "
                    f"example's {size} within [{lo}, {hi}]: it cannot be sampled")
    return corners + check[:1]


def _resize(torch, t, d, n):
    """`t` with dim `d` of size `n`: its slices repeated, then cut."""
    have = int(t.shape[d])
    if have == n:
        return t
    if have == 0:
        return t.new_zeros(*t.shape[:d], n, *t.shape[d + 1:])
    return torch.cat([t] * math.ceil(n / have), d).narrow(d, 0, n).contiguous()


def _generalize(samples, points, names, what, error):
    """One attribute value over the runs: as it is where every run agrees,
    each differing integer solved as an expression of the symbols."""
    first = samples[0]
    if all(s == first and type(s) is type(first) for s in samples):
        return first
    if isinstance(first, (list, tuple)) and all(isinstance(s, (list, tuple)) and
                                                len(s) == len(first) for s in samples):
        return type(first)(_generalize([s[j] for s in samples], points, names, what, error)
                           for j in range(len(first)))
    if all(isinstance(s, int) and not isinstance(s, bool) for s in samples):
        return _solve(samples, points, names, what, error)
    raise error(f"from_torch: {what} depends on the sizes ({samples[0]!r} at "
                f"{_point(points[0])}, {samples[-1]!r} at {_point(points[-1])}): Kiln takes "
                "it as one value")


def _point(p):
    return ", ".join(f"{s}={v}" for s, v in p.items())


def _solve(ys, points, names, what, error):
    """The integer attribute sampled as `ys` as a sum of products of the
    symbols with integer coefficients (multilinear: one coefficient per
    subset of the symbols, fixed by the 2**k corners), checked at the last
    point. Its text in Kiln's dim grammar (docs/IR.md)."""
    from ._fx import _Expr

    k = len(names)
    corners = points[:1 << k]
    subsets = list(range(1 << k))

    def row(p):
        return [math.prod(p[names[j]] for j in range(k) if m >> j & 1) for m in subsets]

    a = [[Fraction(x) for x in row(p)] + [Fraction(y)] for p, y in zip(corners, ys)]
    n = len(subsets)
    for c in range(n):  # Gauss-Jordan; the corner matrix is invertible
        pivot = next(r for r in range(c, n) if a[r][c] != 0)
        a[c], a[pivot] = a[pivot], a[c]
        a[c] = [x / a[c][c] for x in a[c]]
        for r in range(n):
            if r != c and a[r][c] != 0:
                a[r] = [x - a[r][c] * y for x, y in zip(a[r], a[c])]
    coef = [a[m][n] for m in subsets]
    fits = all(c.denominator == 1 for c in coef) and all(
        sum(c * x for c, x in zip(coef, row(p))) == y for p, y in zip(points, ys))
    if not fits:
        raise error(f"from_torch: {what} is " + ", ".join(
            f"{y} at {_point(p)}" for p, y in zip(points, ys)) + ": not a sum of products of "
            "the dynamic dims; Kiln needs it written from them (a -1 in a reshape, say)")
    terms = []
    for m in sorted(subsets, key=lambda m: (-bin(m).count("1"), m)):
        c = int(coef[m])
        if c == 0:
            continue
        factors = [names[j] for j in range(k) if m >> j & 1]
        if not factors:
            body = str(abs(c))
        else:
            body = "*".join(([str(abs(c))] if abs(c) != 1 else []) + factors)
        terms.append(("-" if c < 0 else "+") + body)
    text = "".join(terms).lstrip("+") or "0"
    return _Expr(text)
