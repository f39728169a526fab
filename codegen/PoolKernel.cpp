//===- PoolKernel.cpp - max_pool and avg_pool on channels-last buffers ----===//
//
// Note [Pools as kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A max_pool or avg_pool whose input is stored channels-last and whose
// result is to be stored so (Note [Channels-last buffers] in
// ExecutableBuilder.cpp: between convs) runs as a JIT kernel instead of
// oneDNN 2.6's pooling primitive: googlenet's 13 max pools took 1.44 ms of
// its 19 ms at one thread with oneDNN, 0.67 ms as kernels (`kiln compile
// googlenet.onnx --threads 1 --profile 50`, 2026-12-06; a 3x3 stride-1
// pool of 192 x 28 x 28 149 -> 54 us, the 3x3 stride-2 pool of 64 x 112
// x 112 251 -> 152 us). The kernel iterates the output in
// memory order: outer [N, out spatial...], inner the channels, so every
// tap is a contiguous vector load. A tap is read at its input position
// clamped into the input and replaced where it lies outside (in the
// padding, or past the input in a ceil_mode window) by -inf for max_pool
// and by 0 for avg_pool's sum; the bounds depend only on the outer
// indices, so the vector loop tests nothing per element. The semantics are
// those of the reference kernels (ir/ops/Linalg.cpp): max propagates NaN
// (ScalarOp::Max), a window of padding only gives -inf, so max_pool gives
// the reference's bits; avg_pool sums in float in the reference's tap
// order and divides by the count of taps inside the input (inside the
// padded input with count_include_pad), within avg_pool's bound of the
// reference's double sum (summing in double, with its conversions and
// double division, took twice oneDNN's time on inception_v3's pools).
// Windows of more than kMaxPoolTaps taps stay with oneDNN (the kernel's
// expression grows with the taps).
//
//===----------------------------------------------------------------------===//
#include "codegen/Internal.h"

#include <limits>

namespace kiln::codegen::detail {

namespace {

/// Taps one pool kernel may read per output element.
constexpr int64_t kMaxPoolTaps = 64;

/// One spatial dim of the window: output o reads input o * stride - pad +
/// k * dilation for k in [0, kernel).
struct WindowDim {
  int64_t in = 0, out = 0, kernel = 1, stride = 1, dilation = 1, padBegin = 0, padEnd = 0;
};

} // namespace

FailureOr<Kernel> channelsLastPoolKernel(const Node &n, std::string &why) {
  const bool isMax = n.kind() == OpKind::MaxPool;
  if (!isMax && n.kind() != OpKind::AvgPool) {
    why = "not a max_pool or avg_pool";
    return failure();
  }
  const Value *x = n.operand(0), *y = n.result();
  const std::vector<int64_t> xs = sizesOf(x), ys = sizesOf(y);
  const size_t nsp = xs.size() - 2;
  if (x->type().dtype != DType::F32 || xs.size() < 3 || xs.size() > 5 || ys.size() != xs.size()) {
    why = "only f32 pools of 1 to 3 spatial dims";
    return failure();
  }
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool includePad = false;
  if (isMax) {
    MaxPoolOp op(n);
    kernel = op.kernel(), strides = op.strides(), pads = op.pads(), dilations = op.dilations();
  } else {
    AvgPoolOp op(n);
    kernel = op.kernel(), strides = op.strides(), pads = op.pads(), dilations = op.dilations();
    includePad = op.count_include_pad();
  }
  std::vector<WindowDim> dims(nsp);
  int64_t taps = 1;
  for (size_t d = 0; d < nsp; ++d) {
    WindowDim &w = dims[d];
    w.in = xs[2 + d], w.out = ys[2 + d], w.kernel = kernel.at(d);
    w.stride = strides.empty() ? 1 : strides.at(d);
    w.dilation = dilations.empty() ? 1 : dilations.at(d);
    w.padBegin = pads.empty() ? 0 : pads.at(d);
    w.padEnd = pads.empty() ? 0 : pads.at(nsp + d);
    taps *= w.kernel;
  }
  if (taps > kMaxPoolTaps) {
    why = "a window of " + std::to_string(taps) + " taps (more than " +
          std::to_string(kMaxPoolTaps) + ")";
    return failure();
  }
  if (numElements(xs) == 0 || numElements(ys) == 0) {
    why = "an empty input or result";
    return failure();
  }
  const int64_t batch = xs[0], channels = xs[1];

  Kernel k;
  auto memoryOrder = [&](const std::vector<int64_t> &s) {
    std::vector<int64_t> m{s[0]};
    m.insert(m.end(), s.begin() + 2, s.end());
    m.push_back(s[1]);
    return m;
  };
  k.name = "kernel_" + sanitizedName(y->name());
  k.inputs.push_back({DType::F32, memoryOrder(xs), x->name()});
  k.outputs.push_back({DType::F32, memoryOrder(ys), y->name()});
  k.outer = {batch};
  for (const WindowDim &w : dims)
    k.outer.push_back(w.out);
  k.inner = channels;
  ScalarDag &g = k.dag;
  auto i64 = [&](int64_t v) { return g.constInt(DType::I64, v); };
  const ScalarRef c = g.index(static_cast<int32_t>(k.outer.size()));

  // Per spatial dim and tap: the clamped input position and whether the
  // tap lies inside the input (null: always) and inside the padded input.
  struct Tap {
    ScalarRef at, inside, inPadded;
  };
  std::vector<std::vector<Tap>> perDim(nsp);
  for (size_t d = 0; d < nsp; ++d) {
    const WindowDim &w = dims[d];
    const ScalarRef o = g.index(static_cast<int32_t>(1 + d));
    for (int64_t t = 0; t < w.kernel; ++t) {
      const int64_t shift = t * w.dilation - w.padBegin;
      const int64_t lo = shift, hi = (w.out - 1) * w.stride + shift;
      ScalarRef pos = g.add(g.mul(o, i64(w.stride)), i64(shift));
      Tap tap{pos, {}, {}};
      if (lo < 0 || hi >= w.in) {
        tap.inside = g.binary(ScalarOp::And, g.compare(ScalarOp::Ge, pos, i64(0)),
                              g.compare(ScalarOp::Lt, pos, i64(w.in)));
        tap.at = g.binary(ScalarOp::Min, g.binary(ScalarOp::Max, pos, i64(0)), i64(w.in - 1));
      }
      if (lo < -w.padBegin || hi >= w.in + w.padEnd)
        tap.inPadded = g.binary(ScalarOp::And, g.compare(ScalarOp::Ge, pos, i64(-w.padBegin)),
                                g.compare(ScalarOp::Lt, pos, i64(w.in + w.padEnd)));
      perDim[d].push_back(tap);
    }
  }
  // The taps in the reference's order (the first spatial dim outermost),
  // folded from the fold's identity, which also stands for a tap outside.
  const ScalarRef identity =
      g.constFloat(DType::F32, isMax ? -std::numeric_limits<double>::infinity() : 0.0);
  ScalarRef result = identity;
  std::vector<int64_t> t(nsp, 0);
  for (int64_t flat = 0; flat < taps; ++flat) {
    ScalarRef offset = g.index(0), inside;
    for (size_t d = 0; d < nsp; ++d) {
      const Tap &tap = perDim[d][static_cast<size_t>(t[d])];
      offset = g.add(g.mul(offset, i64(dims[d].in)), tap.at);
      if (tap.inside.valid())
        inside = inside.valid() ? g.binary(ScalarOp::And, inside, tap.inside) : tap.inside;
    }
    offset = g.add(g.mul(offset, i64(channels)), c);
    ScalarRef v = g.load(DType::F32, 0, offset);
    if (inside.valid())
      v = g.select(inside, v, identity);
    result = g.binary(isMax ? ScalarOp::Max : ScalarOp::Add, result, v);
    for (size_t d = nsp; d-- > 0;) { // next tap, last dim fastest
      if (++t[d] < dims[d].kernel)
        break;
      t[d] = 0;
    }
  }
  if (!isMax) {
    // Taps counted per dim (inside the input, or the padded input), then
    // multiplied: the window is a product of its dims' ranges.
    ScalarRef count = i64(1);
    for (size_t d = 0; d < nsp; ++d) {
      ScalarRef inDim = i64(0);
      for (const Tap &tap : perDim[d]) {
        ScalarRef cond = includePad ? tap.inPadded : tap.inside;
        inDim = g.add(inDim, cond.valid() ? g.select(cond, i64(1), i64(0)) : i64(1));
      }
      count = g.mul(count, inDim);
    }
    ScalarRef mean = g.div(result, g.cast(count, DType::F32));
    result = g.select(g.compare(ScalarOp::Gt, count, i64(0)), mean, identity);
  }
  ScalarRef store = g.index(0);
  for (size_t d = 0; d < nsp; ++d)
    store = g.add(g.mul(store, i64(dims[d].out)), g.index(static_cast<int32_t>(1 + d)));
  store = g.add(g.mul(store, i64(channels)), c);
  Stage stage;
  stage.stores.push_back({0, store, result});
  k.stages.push_back(std::move(stage));
  if (!k.verify(&why))
    return failure();
  return k;
}

} // namespace kiln::codegen::detail
