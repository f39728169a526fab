//===- CudaLibrary.cpp - What the CUDA backend runs through cuBLASLt and cuDNN ===//
//
// The CUDA backend's library table (codegen/Backend.h): matmul and gemm
// (cuBLASLt), conv, max_pool, avg_pool and global_avg_pool (cuDNN) anchor
// a library group; a conv takes a residual add, a relu, or both in that
// order (cuDNN's fused convolution, bias, z and activation), a product one
// epilogue, a residual add (cuBLASLt's C; cudaAcceptsEpilogue), and the
// nodes after any other call are a generated kernel; and the mapping of
// such a
// group onto one
// runtime::cuda::GemmCall (runtime/cuda/CublasLt.cpp runs it), ConvCall or
// PoolCall (runtime/cuda/Cudnn.cpp).
//
// A node maps when its operands and result are f32 (the planner anchors
// library groups on f32) and
//   - matmul: both operands of rank >= 2, each operand's leading (batch)
//     dims either those of the result or all 1 (one stride per operand);
//     a batched A over an unbatched B is one product of batch * M rows;
//   - gemm: C absent, or beta 0, or C of the result's shape (beta * C),
//     or C a row of N values ([N] or [1, N]) with beta 1 (the bias).
// Else cublasLtCall says why, and compileCudaModel writes every product of
// the model as generated code instead (passes/DecomposeMatMul.cpp). A
// product's one user adding a tensor of its result's type (a residual) is
// the call's C with beta 1, D = alpha A B + R (residualOf), when the
// product leaves C unread. cuBLASLt adds R to alpha A B before rounding,
// and a bias row after R (the graph: the bias, then R), so sums differ from
// the kernels' within rounding; a conv's residual is cuDNN's z, added
// before the bias alike.
//
// A convolution or pool maps when it is 1-D or 2-D (NCW as NC1W), f32, its
// pads symmetric, a pool's dilations 1 and its output the size of floor
// rounding (a ceil_mode window that adds nothing). Else cudnnCall says
// why, and compileCudaModel names the node in its error. Before that,
// padForCudnn gives convolutions and max pools whose pads alone stand in
// the way an explicit pad (Note [Pads cuDNN does not take]).
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaProgram.h"
#include "ir/Builder.h"
#include "ir/Ops.h"

#include <limits>

namespace kiln::codegen {

const LibraryCapabilities &cudaLibraryCapabilities() {
  static const LibraryOpSupport rows[] = {
      {OpKind::MatMul, /*anchor=*/true},
      {OpKind::Gemm, /*anchor=*/true},
      {OpKind::Conv, /*anchor=*/true},
      {OpKind::MaxPool, /*anchor=*/true},
      {OpKind::AvgPool, /*anchor=*/true},
      {OpKind::GlobalAvgPool, /*anchor=*/true},
      {OpKind::Relu, /*anchor=*/false, /*epilogue=*/true},
      {OpKind::Add, /*anchor=*/false, /*epilogue=*/true},
  };
  static const LibraryCapabilities caps("cuBLASLt and cuDNN", rows);
  return caps;
}

const Value *residualOf(const Node &anchor, const Node &add) {
  if ((anchor.kind() != OpKind::MatMul && anchor.kind() != OpKind::Gemm &&
       anchor.kind() != OpKind::Conv) ||
      add.kind() != OpKind::Add || add.numOperands() != 2)
    return nullptr;
  const Value *chain = anchor.result();
  if (add.operand(0) != chain && add.operand(1) != chain)
    return nullptr;
  const Value *other = add.operand(add.operand(0) == chain ? 1 : 0);
  // C is read with D's layout: the same type, no broadcast.
  if (other == chain || other->type() != chain->type() || !chain->type().isStatic())
    return nullptr;
  // A gemm whose own C is read (beta * C of the result's shape) has no C
  // left for it; a bias row goes through the BIAS epilogue and leaves it.
  if (anchor.kind() == OpKind::Gemm && anchor.numOperands() > 2 && GemmOp(anchor).beta() != 0.0 &&
      anchor.operand(2)->type().shape == chain->type().shape)
    return nullptr;
  return other;
}

bool cudaAcceptsEpilogue(const Node &anchor, const Node &next, size_t chained) {
  // A conv takes a residual add, a relu, or both in that order: relu(conv +
  // bias + z), one cuDNN call.
  if (anchor.kind() == OpKind::Conv) {
    if (chained == 0)
      return next.kind() == OpKind::Relu || residualOf(anchor, next) != nullptr;
    const Node *previous = next.operand(0)->definingNode();
    return chained == 1 && next.kind() == OpKind::Relu && previous &&
           previous->kind() == OpKind::Add;
  }
  // A product's relu stays a kernel: cuBLASLt's RELU epilogue is not known
  // to keep NaN (Kiln's relu does). Its residual add is cuBLASLt's C.
  return chained == 0 && residualOf(anchor, next) != nullptr;
}

namespace {

std::vector<int64_t> sizesOf(const Value *v) {
  std::vector<int64_t> s;
  for (const Dim &d : v->type().shape)
    s.push_back(d.size());
  return s;
}

int64_t product(std::span<const int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

} // namespace

std::optional<runtime::cuda::GemmCall> cublasLtCall(const Node &n, std::string &why) {
  runtime::cuda::GemmCall g;
  const DType dt = n.result()->type().dtype;
  if (dt != DType::F32) {
    why = "cuBLASLt runs f32 products here, not " + std::string(dtypeName(dt));
    return std::nullopt;
  }
  for (const Value *v : n.operands())
    if (v->type().dtype != dt) {
      why = "its operands' types differ";
      return std::nullopt;
    }
  const std::vector<int64_t> a = sizesOf(n.operand(0)), b = sizesOf(n.operand(1)),
                             y = sizesOf(n.result());
  if (a.size() < 2 || b.size() < 2) {
    why = "an operand of rank 1";
    return std::nullopt;
  }
  if (n.kind() == OpKind::Gemm) {
    const GemmOp op(n);
    g.transA = op.trans_a();
    g.transB = op.trans_b();
    g.m = y[0];
    g.n = y[1];
    g.k = g.transA ? a[0] : a[1];
    g.alpha = op.alpha();
    if (n.numOperands() > 2 && op.beta() != 0.0) {
      const std::vector<int64_t> c = sizesOf(n.operand(2));
      if (c == y) {
        g.hasC = true;
        g.beta = op.beta();
        g.strideC = g.m * g.n;
      } else if (op.beta() == 1.0 &&
                 (c == std::vector<int64_t>{g.n} || c == std::vector<int64_t>{1, g.n})) {
        g.hasBias = true;
      } else {
        why = "its C (" + sizesStr(c) + ", beta " + std::to_string(op.beta()) +
              ") is neither the result's shape nor a row of N with beta 1";
        return std::nullopt;
      }
    }
    g.strideD = g.m * g.n;
    return g;
  }
  // matmul: [..., M, K] @ [..., K, N] -> [..., M, N], batch dims broadcast.
  const size_t batchRank = y.size() - 2;
  const std::span<const int64_t> yb(y.data(), batchRank);
  g.batch = product(yb);
  g.m = y[y.size() - 2];
  g.n = y.back();
  g.k = a.back();
  // One stride per operand: its batch dims are the result's, or all 1.
  auto stride = [&](const std::vector<int64_t> &s, int64_t matrix, int64_t &out) {
    const std::span<const int64_t> sb(s.data(), s.size() - 2);
    if (product(sb) == 1) {
      out = 0;
      return true;
    }
    if (sb.size() != batchRank || !std::equal(sb.begin(), sb.end(), yb.begin()))
      return false;
    out = matrix;
    return true;
  };
  if (!stride(a, g.m * g.k, g.strideA) || !stride(b, g.k * g.n, g.strideB)) {
    why = "its operands' batch dims (" + sizesStr(a) + " @ " + sizesStr(b) +
          ") broadcast against each other";
    return std::nullopt;
  }
  g.strideD = g.m * g.n;
  if (g.strideB == 0 && g.batch > 1 && g.strideA != 0) { // one product of batch * M rows
    g.m *= g.batch;
    g.batch = 1;
    g.strideA = 0;
    g.strideD = 0;
  }
  return g;
}

namespace {

/// A 1-D or 2-D window's attributes as (h, w) pairs: `values` has one per
/// spatial dim (empty: `fallback`), or two per dim for pads.
bool windowPair(const std::vector<int64_t> &values, size_t spatial, int64_t fallback, bool pads,
                int64_t &h, int64_t &w) {
  if (values.empty()) {
    h = spatial == 1 ? (pads ? 0 : 1) : fallback;
    w = fallback;
    return true;
  }
  if (pads) {
    if (values.size() != 2 * spatial)
      return false;
    for (size_t i = 0; i < spatial; ++i)
      if (values[i] != values[i + spatial])
        return false;
  } else if (values.size() != spatial) {
    return false;
  }
  h = spatial == 1 ? (pads ? 0 : 1) : values[0];
  w = values[spatial - 1];
  return true;
}

} // namespace

// Note [Pads cuDNN does not take]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cuDNN pads both sides of a dim alike and rounds a window's output size
// down. A convolution padded more on one side (TensorFlow's "same", a pad
// folded into it), or a max pool whose ceil_mode window reaches past its
// end padding (googlenet's), reads instead a pad node's result: the input
// padded by the excess (zeros for a convolution, -inf for a max pool, as
// the reference treats taps outside the input), the node keeping the pads
// both sides share and ceil_mode off. Its end padding grows to what the
// last window needs, so that rounding down gives the recorded size. The
// pad is a generated kernel; the node's result is unchanged. An average
// pool is left alone: its count of taps would count the explicit pad.

LogicalResult padForCudnn(Graph &g, DiagnosticEngine &diag) {
  for (Node *n : g.nodeList()) {
    if (n->kind() != OpKind::Conv && n->kind() != OpKind::MaxPool)
      continue;
    const std::vector<int64_t> x = sizesOf(n->operand(0)), y = sizesOf(n->result());
    if ((x.size() != 3 && x.size() != 4) || n->operand(0)->type().dtype != DType::F32)
      continue;
    const size_t spatial = x.size() - 2;
    std::vector<int64_t> pads, strides, dilations, extent(spatial);
    if (n->kind() == OpKind::Conv) {
      const ConvOp op(*n);
      pads = op.pads();
      strides = op.strides();
      dilations = op.dilations();
      const std::vector<int64_t> w = sizesOf(n->operand(1));
      for (size_t d = 0; d < spatial; ++d)
        extent[d] = w[2 + d];
    } else {
      const MaxPoolOp op(*n);
      pads = op.pads();
      strides = op.strides();
      dilations = op.dilations();
      if (op.kernel().size() != spatial)
        continue;
      extent = op.kernel();
    }
    pads.resize(2 * spatial, 0);
    strides.resize(spatial, 1);
    dilations.resize(spatial, 1);
    if (n->kind() == OpKind::MaxPool &&
        std::any_of(dilations.begin(), dilations.end(), [](int64_t d) { return d != 1; }))
      continue;
    std::vector<int64_t> keep(2 * spatial), extra(2 * x.size(), 0);
    bool needed = false;
    for (size_t d = 0; d < spatial; ++d) {
      const int64_t span = dilations[d] * (extent[d] - 1) + 1;
      const int64_t begin = pads[d];
      // What the last window reaches past the input's end, at least the
      // end pads given.
      const int64_t end =
          std::max(pads[spatial + d], (y[2 + d] - 1) * strides[d] + span - x[2 + d] - begin);
      const int64_t both = std::min(begin, end);
      keep[d] = keep[spatial + d] = both;
      extra[2 + d] = begin - both;
      extra[x.size() + 2 + d] = end - both;
      needed = needed || begin != end;
    }
    if (!needed) // a ceil_mode window that adds nothing: cudnnCall takes it
      continue;
    Builder b(g, diag);
    b.setInsertionPoint(n);
    b.setLoc(n->loc());
    const double fill = n->kind() == OpKind::Conv ? 0.0 : -std::numeric_limits<double>::infinity();
    Value *padded = b.createValue(OpKind::Pad, {n->operand(0)}, {{"pads", extra}, {"value", fill}});
    if (!padded)
      return failure();
    n->setOperand(0, padded);
    if (n->kind() == OpKind::Conv) {
      n->setAttr(ConvOp::pads_index, keep);
    } else {
      n->setAttr(MaxPoolOp::pads_index, keep);
      n->setAttr(MaxPoolOp::ceil_mode_index, false);
    }
  }
  return success();
}

std::optional<CudnnCall> cudnnCall(const Node &n, bool relu, std::string &why) {
  const std::vector<int64_t> x = sizesOf(n.operand(0)), y = sizesOf(n.result());
  for (const Value *v : n.operands())
    if (v->type().dtype != DType::F32) {
      why = "cuDNN runs f32 here, not " + std::string(dtypeName(v->type().dtype));
      return std::nullopt;
    }
  if (x.size() != 3 && x.size() != 4) {
    why = "cuDNN runs 1-D and 2-D windows here, not " + std::to_string(x.size() - 2) + "-D";
    return std::nullopt;
  }
  const size_t spatial = x.size() - 2;
  const int64_t h = spatial == 1 ? 1 : x[2], w = x.back();
  const int64_t outH = spatial == 1 ? 1 : y[2], outW = y.back();
  CudnnCall out;
  if (n.kind() == OpKind::Conv) {
    const ConvOp op(n);
    const std::vector<int64_t> wt = sizesOf(n.operand(1));
    runtime::cuda::ConvCall &c = out.conv;
    c = {x[0], x[1], h, w, wt[0], spatial == 1 ? 1 : wt[2], wt.back(), outH, outW};
    c.group = op.group();
    c.hasBias = n.numOperands() > 2;
    c.relu = relu;
    if (!windowPair(op.pads(), spatial, 0, true, c.padH, c.padW)) {
      why = "its pads " + sizesStr(op.pads()) + " are not the same on both sides (cuDNN's)";
      return std::nullopt;
    }
    if (!windowPair(op.strides(), spatial, 1, false, c.strideH, c.strideW) ||
        !windowPair(op.dilations(), spatial, 1, false, c.dilationH, c.dilationW)) {
      why = "its strides or dilations do not match its rank";
      return std::nullopt;
    }
    out.kind = CudnnCall::Kind::Conv;
    return out;
  }
  runtime::cuda::PoolCall &p = out.pool;
  p.n = x[0];
  p.c = x[1];
  p.h = h;
  p.w = w;
  p.outH = outH;
  p.outW = outW;
  std::vector<int64_t> kernel, strides, pads, dilations;
  if (n.kind() == OpKind::MaxPool) {
    const MaxPoolOp op(n);
    kernel = op.kernel();
    strides = op.strides();
    pads = op.pads();
    dilations = op.dilations();
  } else if (n.kind() == OpKind::AvgPool) {
    const AvgPoolOp op(n);
    kernel = op.kernel();
    strides = op.strides();
    pads = op.pads();
    dilations = op.dilations();
    p.countPad = op.count_include_pad();
    p.kind = runtime::cuda::PoolCall::Kind::Average;
  } else { // global_avg_pool: one window over the spatial dims
    kernel.assign(x.begin() + 2, x.end());
    p.kind = runtime::cuda::PoolCall::Kind::Average;
  }
  int64_t dh = 1, dw = 1;
  if (!windowPair(kernel, spatial, 1, false, p.r, p.s) ||
      !windowPair(strides, spatial, 1, false, p.strideH, p.strideW) ||
      !windowPair(dilations, spatial, 1, false, dh, dw)) {
    why = "its window does not match its rank";
    return std::nullopt;
  }
  if (spatial == 1)
    p.r = 1;
  if (dh != 1 || dw != 1) {
    why = "cuDNN's pools have no dilation";
    return std::nullopt;
  }
  if (!windowPair(pads, spatial, 0, true, p.padH, p.padW)) {
    why = "its pads " + sizesStr(pads) + " are not the same on both sides (cuDNN's)";
    return std::nullopt;
  }
  // cuDNN rounds the output size down; a ceil_mode pool maps when that
  // gives the same size.
  if ((p.h + 2 * p.padH - p.r) / p.strideH + 1 != p.outH ||
      (p.w + 2 * p.padW - p.s) / p.strideW + 1 != p.outW) {
    why = "its ceil_mode window past the input (cuDNN rounds the output size down)";
    return std::nullopt;
  }
  out.kind = CudnnCall::Kind::Pool;
  return out;
}

} // namespace kiln::codegen
