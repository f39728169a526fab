#!/usr/bin/env python3
"""Differential test of the reference kernels against NumPy.

For each case: a one-op (or few-op) graph in .kir text, random inputs, and a
NumPy function computing the expected output. The script writes the graph
and inputs to a scratch folder, runs `kiln run --output-dir`, and compares
every output with NumPy's at a per-dtype tolerance (f32: rtol 1e-5 after
NumPy computes in float64; integers and bools: exact).

usage: check_reference.py KILN SCRATCH_DIR [--filter SUBSTRING]
Prints one line per case and a summary; exits 1 if any case fails.
"""
import math
import os
import subprocess
import sys

import numpy as np

rng = np.random.default_rng(1234)
erf = np.vectorize(math.erf, otypes=[np.float64])

NP_DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
             "i8": np.int8, "u8": np.uint8, "bool": np.bool_, "f16": np.float16}


def ty(a):
    name = {np.dtype(v): k for k, v in NP_DTYPES.items()}[a.dtype]
    return "%s[%s]" % (name, ",".join(str(d) for d in a.shape))


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def pos(*shape):
    return (rng.random(shape) * 3 + 0.1).astype(np.float32)


def ints(*shape, lo=-5, hi=6, dtype=np.int64):
    return rng.integers(lo, hi, shape).astype(dtype)


def bools(*shape):
    return rng.random(shape) < 0.5


CASES = []


def case(name, op_text, inputs, expect, attrs=""):
    """op_text: the op mnemonic; inputs: list of arrays; expect: f(*inputs) -> array(s)."""
    CASES.append((name, op_text, inputs, expect, attrs))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# --- elementwise unary (float) ---
x = randn(3, 4)
for op, f, inp in [
    ("neg", np.negative, x), ("abs", np.abs, x), ("exp", np.exp, x), ("log", np.log, pos(3, 4)),
    ("sqrt", np.sqrt, pos(3, 4)), ("rsqrt", lambda a: 1 / np.sqrt(a), pos(3, 4)),
    ("reciprocal", lambda a: 1 / a, pos(3, 4)), ("sigmoid", sigmoid, x), ("tanh", np.tanh, x),
    ("relu", lambda a: np.maximum(a, 0), x), ("erf", erf, x), ("sin", np.sin, x),
    ("cos", np.cos, x), ("floor", np.floor, x * 3), ("ceil", np.ceil, x * 3),
    ("round", np.round, np.array([[0.5, 1.5, 2.5, -0.5], [-1.5, 0.49, 2.51, -2.5]], np.float32)),
    ("sign", np.sign, np.array([[-2, 0, 3.5, -0.0]], np.float32)),
    ("softplus", lambda a: np.log1p(np.exp(a)), x),
    ("hard_swish", lambda a: a * np.clip(a / 6 + 0.5, 0, 1), x * 4),
    ("gelu", lambda a: 0.5 * a * (1 + erf(a / math.sqrt(2))), x),
]:
    case(op, op, [inp], f)
case("leaky_relu", "leaky_relu", [x], lambda a: np.where(a > 0, a, 0.2 * a), "{alpha = 0.2}")
case("elu", "elu", [x], lambda a: np.where(a > 0, a, 0.5 * (np.exp(a) - 1)), "{alpha = 0.5}")
case("clip", "clip", [x], lambda a: np.clip(a, -0.5, 0.25), "{max = 0.25, min = -0.5}")
case("hard_sigmoid", "hard_sigmoid", [x * 4], lambda a: np.clip(0.3 * a + 0.4, 0, 1),
     "{alpha = 0.3, beta = 0.4}")
case("gelu_tanh", "gelu", [x],
     lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3))),
     '{approximate = "tanh"}')
case("cast_f32_i32", "cast", [x * 10], lambda a: np.trunc(a).astype(np.int32), "{to = i32}")
case("cast_i64_f32", "cast", [ints(3, 4)], lambda a: a.astype(np.float32), "{to = f32}")
case("cast_f32_bool", "cast", [np.array([0, 1.5, -0.0, 2], np.float32)],
     lambda a: a != 0, "{to = bool}")
case("not", "not", [bools(2, 5)], np.logical_not)

# --- elementwise binary with broadcasting ---
a, b = randn(2, 3, 4), randn(3, 1)
for op, f in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
              ("max", np.maximum), ("min", np.minimum), ("equal", np.equal),
              ("less", np.less), ("greater", np.greater)]:
    case(op, op, [a, b], f)
case("pow", "pow", [pos(2, 3), randn(3)], np.power)
case("add_i64", "add", [ints(4, 1), ints(1, 5)], np.add)
case("mul_i32", "mul", [ints(3, 3, dtype=np.int32), ints(3, dtype=np.int32)], np.multiply)
case("div_i64_trunc", "div", [np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])],
     lambda p, q: np.trunc(p / q).astype(np.int64))
case("equal_i64", "equal", [ints(5), ints(5)], np.equal)
case("and", "and", [bools(3, 4), bools(4)], np.logical_and)
case("or", "or", [bools(3, 4), bools(3, 1)], np.logical_or)
case("where", "where", [bools(3, 1), randn(3, 4), randn(4)], np.where)

# --- reductions and normalizations ---
r = randn(2, 3, 5)
case("reduce_sum", "reduce_sum", [r], lambda t: t.sum(axis=(1,), keepdims=True), "{axes = [1]}")
case("reduce_mean", "reduce_mean", [r], lambda t: t.mean(axis=(0, 2)),
     "{axes = [0, -1], keepdims = false}")
case("reduce_max_all", "reduce_max", [r], lambda t: t.max(keepdims=True))
case("reduce_min", "reduce_min", [r], lambda t: t.min(axis=2, keepdims=True), "{axes = [2]}")
case("reduce_prod", "reduce_prod", [r], lambda t: t.prod(axis=1), "{axes = [1], keepdims = false}")
case("reduce_sum_i64", "reduce_sum", [ints(3, 4)], lambda t: t.sum(axis=1, keepdims=True),
     "{axes = [1]}")
case("argmax", "argmax", [r], lambda t: t.argmax(axis=2), "{axis = 2, keepdims = false}")
case("argmax_keep", "argmax", [r], lambda t: np.expand_dims(t.argmax(axis=1), 1), "{axis = 1}")


def softmax(t, axis=-1):
    e = np.exp(t - t.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


case("softmax", "softmax", [r * 5], softmax)
case("softmax_axis1", "softmax", [r], lambda t: softmax(t, 1), "{axis = 1}")
case("log_softmax", "log_softmax", [r * 5], lambda t: np.log(softmax(t)))


def layer_norm(t, scale, bias=None, axis=-1, eps=1e-5):
    axes = tuple(range(axis % t.ndim, t.ndim))
    m = t.mean(axis=axes, keepdims=True)
    v = ((t - m) ** 2).mean(axis=axes, keepdims=True)
    y = (t - m) / np.sqrt(v + eps) * scale
    return y if bias is None else y + bias


case("layer_norm", "layer_norm", [r, randn(5), randn(5)], layer_norm)
case("layer_norm_2d", "layer_norm", [r, randn(3, 5)], lambda t, s: layer_norm(t, s, axis=1),
     "{axis = 1}")
bx = randn(2, 3, 4, 4)
bscale, bbias, bmean, bvar = randn(3), randn(3), randn(3), pos(3)
case("batch_norm", "batch_norm", [bx, bscale, bbias, bmean, bvar],
     lambda t, s, b_, m, v: (t - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-3)
     * s[:, None, None] + b_[:, None, None], "{epsilon = 0.001}")

# --- linear algebra and windows ---
case("matmul_2d", "matmul", [randn(4, 6), randn(6, 5)], np.matmul)
case("matmul_batched_broadcast", "matmul", [randn(2, 1, 3, 4), randn(3, 4, 5)], np.matmul)
case("matmul_vec", "matmul", [randn(4), randn(2, 4, 3)], np.matmul)
case("gemm", "gemm", [randn(3, 4), randn(5, 4), randn(5)],
     lambda p, q, c: 0.5 * p @ q.T + 2.0 * c, "{alpha = 0.5, beta = 2.0, trans_b = true}")
case("gemm_trans_a", "gemm", [randn(4, 3), randn(4, 5)], lambda p, q: p.T @ q, "{trans_a = true}")


def conv_nd(x, w, b=None, strides=None, pads=None, dil=None, group=1):
    n, c = x.shape[:2]
    sp = x.ndim - 2
    strides = strides or [1] * sp
    dil = dil or [1] * sp
    pads = pads or [0] * (2 * sp)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[i], pads[i + sp]) for i in range(sp)])
    m = w.shape[0]
    k = w.shape[2:]
    out_sp = [(xp.shape[2 + i] - dil[i] * (k[i] - 1) - 1) // strides[i] + 1 for i in range(sp)]
    out = np.zeros([n, m] + out_sp)
    cg, mg = c // group, m // group
    for g in range(group):
        for oc in range(g * mg, (g + 1) * mg):
            for idx in np.ndindex(*out_sp):
                sl = [slice(None), slice(g * cg, (g + 1) * cg)] + [
                    slice(idx[i] * strides[i], idx[i] * strides[i] + dil[i] * (k[i] - 1) + 1, dil[i])
                    for i in range(sp)]
                out[(slice(None), oc) + idx] = (xp[tuple(sl)] * w[oc]).reshape(n, -1).sum(1)
    if b is not None:
        out += b.reshape([1, m] + [1] * sp)
    return out


case("conv2d", "conv", [randn(1, 3, 7, 7), randn(4, 3, 3, 3), randn(4)],
     lambda p, q, c: conv_nd(p, q, c, [2, 1], [1, 0, 1, 2], [1, 2]),
     "{dilations = [1, 2], pads = [1, 0, 1, 2], strides = [2, 1]}")
case("conv2d_grouped", "conv", [randn(2, 4, 5, 5), randn(6, 2, 3, 3)],
     lambda p, q: conv_nd(p, q, group=2), "{group = 2}")
case("conv2d_depthwise", "conv", [randn(1, 3, 6, 6), randn(3, 1, 3, 3)],
     lambda p, q: conv_nd(p, q, pads=[1, 1, 1, 1], group=3), "{group = 3, pads = [1, 1, 1, 1]}")
case("conv1d", "conv", [randn(2, 3, 9), randn(2, 3, 4)],
     lambda p, q: conv_nd(p, q, strides=[2]), "{strides = [2]}")


def conv_transpose(x, w, strides, pads, out_pad):
    n, c, h, wd = x.shape
    _, m, kh, kw = w.shape
    sh, sw = strides
    full = np.zeros((n, m, (h - 1) * sh + kh + out_pad[0], (wd - 1) * sw + kw + out_pad[1]))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw] += np.einsum(
                "nc,cmab->nmab", x[:, :, i, j].astype(np.float64), w)
    return full[:, :, pads[0]:full.shape[2] - pads[2], pads[1]:full.shape[3] - pads[3]]


case("conv_transpose", "conv_transpose", [randn(1, 2, 3, 4), randn(2, 3, 3, 3)],
     lambda p, q: conv_transpose(p, q, [2, 2], [1, 1, 1, 1], [1, 0]),
     "{output_padding = [1, 0], pads = [1, 1, 1, 1], strides = [2, 2]}")


def pool(x, k, s, pads, kind, include_pad=False):
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])],
                constant_values=fill)
    ones = np.pad(np.ones(x.shape[2:]), [(pads[0], pads[2]), (pads[1], pads[3])])
    oh = (xp.shape[2] - k[0]) // s[0] + 1
    ow = (xp.shape[3] - k[1]) // s[1] + 1
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]]
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = k[0] * k[1] if include_pad else ones[i * s[0]:i * s[0] + k[0],
                                                           j * s[1]:j * s[1] + k[1]].sum()
                out[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return out


px = randn(2, 3, 7, 7)
case("max_pool", "max_pool", [px], lambda t: pool(t, [3, 3], [2, 2], [1, 1, 1, 1], "max"),
     "{kernel = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]}")
case("avg_pool", "avg_pool", [px], lambda t: pool(t, [3, 3], [2, 2], [1, 1, 1, 1], "avg"),
     "{kernel = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]}")
case("avg_pool_incl", "avg_pool", [px],
     lambda t: pool(t, [2, 2], [1, 1], [1, 1, 0, 0], "avg", True),
     "{count_include_pad = true, kernel = [2, 2], pads = [1, 1, 0, 0]}")
case("global_avg_pool", "global_avg_pool", [px], lambda t: t.mean(axis=(2, 3), keepdims=True))

# --- data movement ---
d = randn(2, 3, 4)
case("reshape", "reshape", [d], lambda t: t.reshape(4, -1), "{shape = [4, -1]}")
case("reshape_zero", "reshape", [d], lambda t: t.reshape(2, 12), "{shape = [0, -1]}")
case("transpose", "transpose", [d], lambda t: t.transpose(2, 0, 1), "{perm = [2, 0, 1]}")
case("transpose_default", "transpose", [d], lambda t: t.transpose())
case("flatten", "flatten", [d], lambda t: t.reshape(6, 4), "{axis = 2}")
case("squeeze", "squeeze", [randn(1, 3, 1, 2)], lambda t: t.reshape(3, 2))
case("unsqueeze", "unsqueeze", [d], lambda t: t.reshape(1, 2, 3, 4, 1), "{axes = [0, -1]}")
case("concat", "concat", [d, randn(2, 1, 4), randn(2, 2, 4)],
     lambda *ts: np.concatenate(ts, axis=1), "{axis = 1}")
case("slice", "slice", [d], lambda t: t[:, ::-2, 1:3],
     "{axes = [1, 2], ends = [-9223372036854775808, 3], starts = [-1, 1], steps = [-2, 1]}")
case("gather", "gather", [d, np.array([[2, -1], [0, 1]])], lambda t, i: np.take(t, i, axis=1),
     "{axis = 1}")
case("expand", "expand", [randn(3, 1)], lambda t: np.broadcast_to(t, (2, 3, 4)),
     "{shape = [2, 1, 4]}")
case("pad_constant", "pad", [d], lambda t: np.pad(t, [(0, 0), (1, 2), (0, 1)], constant_values=1.5),
     "{pads = [0, 1, 0, 0, 2, 1], value = 1.5}")
case("pad_reflect", "pad", [d], lambda t: np.pad(t, [(0, 0), (2, 1), (1, 2)], mode="reflect"),
     '{mode = "reflect", pads = [0, 2, 1, 0, 1, 2]}')
case("pad_edge", "pad", [d], lambda t: np.pad(t, [(1, 0), (0, 2), (3, 0)], mode="edge"),
     '{mode = "edge", pads = [1, 0, 3, 0, 2, 0]}')
case("resize_nearest_2x", "resize", [randn(1, 2, 3, 3)],
     lambda t: t.repeat(2, axis=2).repeat(2, axis=3),
     '{coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scales = [1.0, 1.0, 2.0, 2.0]}')


def resize_linear_half_pixel(t, oh, ow):
    n, c, h, w = t.shape
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        y = max((i + 0.5) * h / oh - 0.5, 0)
        y0 = min(int(math.floor(y)), h - 1)
        y1 = min(y0 + 1, h - 1)
        fy = y - y0
        for j in range(ow):
            xx = max((j + 0.5) * w / ow - 0.5, 0)
            x0 = min(int(math.floor(xx)), w - 1)
            x1 = min(x0 + 1, w - 1)
            fx = xx - x0
            out[:, :, i, j] = (t[:, :, y0, x0] * (1 - fy) * (1 - fx) + t[:, :, y0, x1] * (1 - fy) * fx
                               + t[:, :, y1, x0] * fy * (1 - fx) + t[:, :, y1, x1] * fy * fx)
    return out


case("resize_linear", "resize", [randn(1, 2, 3, 4)], lambda t: resize_linear_half_pixel(t, 5, 7),
     '{mode = "linear", sizes = [1, 2, 5, 7]}')
case("shape", "shape", [d], lambda t: np.array(t.shape, np.int64))
case("shape_slice", "shape", [d], lambda t: np.array(t.shape[1:], np.int64), "{start = 1}")


def split_case():
    t = randn(2, 6)
    CASES.append(("split", "split", [t], lambda u: np.split(u, [1, 4], axis=1),
                  "{axis = 1, sizes = [1, 3, 2]}"))
    CASES.append(("split_equal", "split", [t], lambda u: np.split(u, 3, axis=1), "{axis = 1}"))


split_case()


def tolerance(dtype):
    return {np.float32: (1e-5, 1e-6), np.float64: (1e-12, 1e-12), np.float16: (1e-3, 1e-3)}.get(
        dtype.type, (0, 0))


def run_case(kiln, scratch, name, op, inputs, expect, attrs):
    want = expect(*inputs)
    outs = list(want) if isinstance(want, (list, tuple)) else [want]
    outs = [np.asarray(o) for o in outs]
    # Expected dtype: floats follow the first float input, otherwise what NumPy gives.
    first = inputs[0].dtype
    fixed = []
    for o in outs:
        if o.dtype == np.float64 and first.kind == "f":
            o = o.astype(first)
        fixed.append(o)
    outs = fixed
    names = ["%%in%d" % i for i in range(len(inputs))]
    sig = ", ".join("%s: %s" % (n, ty(a)) for n, a in zip(names, inputs))
    res = ["%%r%d" % i for i in range(len(outs))]
    text = "graph @%s(%s) -> (%s) {\n  %s = %s(%s)%s : %s\n  return %s\n}\n" % (
        name, sig, ", ".join(ty(o) for o in outs), ", ".join(res), op, ", ".join(names),
        " " + attrs if attrs else "", ", ".join(ty(o) for o in outs), ", ".join(res))
    d = os.path.join(scratch, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "g.kir"), "w") as f:
        f.write(text)
    cmd = [kiln, "run", os.path.join(d, "g.kir"), "--output-dir", d]
    for i, a in enumerate(inputs):
        p = os.path.join(d, "in%d.npy" % i)
        np.save(p, a)
        cmd += ["--input", "in%d=%s" % (i, p)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return "kiln run failed:\n" + text + p.stderr
    for k, o in enumerate(outs):
        got = np.load(os.path.join(d, "output_%d.npy" % k))
        if got.shape != o.shape or got.dtype != o.dtype:
            return "output %d: got %s %s, want %s %s" % (k, got.dtype, got.shape, o.dtype, o.shape)
        rtol, atol = tolerance(o.dtype)
        if not np.allclose(got, o, rtol=rtol, atol=atol, equal_nan=True):
            err = np.max(np.abs(got.astype(np.float64) - o.astype(np.float64)))
            return "output %d: max abs error %g beyond rtol %g atol %g" % (k, err, rtol, atol)
    return None


def main():
    kiln, scratch = sys.argv[1], sys.argv[2]
    filt = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--filter" else ""
    failures = 0
    count = 0
    for name, op, inputs, expect, attrs in CASES:
        if filt not in name:
            continue
        count += 1
        err = run_case(kiln, scratch, name, op, inputs, expect, attrs)
        print("%-28s %s" % (name, "ok" if err is None else "FAIL"))
        if err:
            failures += 1
            print("  " + err.replace("\n", "\n  "))
    print("%d cases, %d failed" % (count, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
