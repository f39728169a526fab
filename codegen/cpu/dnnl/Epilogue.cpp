//===- Epilogue.cpp - oneDNN's op table and the post-op mapping -----------===//
//
// The oneDNN backend's table (codegen/Backend.h): the ops it anchors, the
// elementwise ops it applies as post-ops after an anchor, and the anchors
// that read and write channels-last buffers. Next to it, mapEpilogueNode
// turns each epilogue op of the table into post-ops; EpilogueTableTest
// (tests/unit/compiler/CompilerTest.cpp) compiles every epilogue row after a
// conv and checks it fused.
//
//===----------------------------------------------------------------------===//
#include "codegen/cpu/dnnl/Internal.h"

#include <algorithm>

namespace kiln::codegen::cpu {

namespace {

// Note [oneDNN epilogue ops]: every elementwise op mapEpilogueNode maps is
// a row here, and nothing else. Log, Neg and Softplus were mapped but not in
// the planner's list; measured as a post-op against a JIT kernel after the
// anchor (1 thread, this AVX-512 VM, median of 7 runs of `kiln compile F
// --threads 1 --profile 200`; conv 1x64x56x56 3x3, matmul 128x512x512):
//   log       conv 4.07 vs 5.03 ms, matmul 0.78 vs 1.33 ms: post-op;
//   softplus  conv 4.16 vs 4.52 ms, matmul 0.81 vs 0.85 ms: post-op;
//   neg       conv 3.97 vs 3.61 ms, matmul 0.71 vs 0.70 ms: kernel (the
//             post-op mapping was removed).
constexpr LibraryOpSupport kOneDnnOps[] = {
    // Anchors.
    {OpKind::AvgPool, true, false, true},
    {OpKind::Conv, true, false, true},
    {OpKind::ConvTranspose, true, false, true},
    {OpKind::Gemm, true, false, false},
    {OpKind::GlobalAvgPool, true, false, true},
    {OpKind::Gru, true, false, false},
    {OpKind::Lstm, true, false, false},
    {OpKind::MatMul, true, false, false, true},
    {OpKind::MaxPool, true, false, true},
    {OpKind::Rnn, true, false, false},
    // Epilogue ops: binary post-ops, then eltwise ones.
    {OpKind::Add, false, true},
    {OpKind::Max, false, true},
    {OpKind::Min, false, true},
    {OpKind::Mul, false, true},
    {OpKind::Sub, false, true},
    {OpKind::Div, false, true},
    {OpKind::Abs, false, true},
    {OpKind::Clip, false, true},
    {OpKind::Elu, false, true},
    {OpKind::Exp, false, true},
    {OpKind::Gelu, false, true},
    {OpKind::HardSigmoid, false, true},
    {OpKind::HardSwish, false, true},
    {OpKind::LeakyRelu, false, true},
    {OpKind::Log, false, true},
    {OpKind::Relu, false, true},
    {OpKind::Sigmoid, false, true},
    {OpKind::Softplus, false, true},
    {OpKind::Sqrt, false, true},
    {OpKind::Tanh, false, true},
};

} // namespace

const LibraryCapabilities &oneDnnCapabilities() {
  static const LibraryCapabilities caps("oneDNN", kOneDnnOps);
  return caps;
}

namespace onednn {
namespace {

PostOp eltwise(algorithm alg, float alpha = 0, float beta = 0) {
  PostOp p;
  p.alg = alg;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

/// `other`'s broadcast dims in the anchor's oneDNN dst rank, or nullopt
/// when it does not broadcast to the anchor's result without growing it.
std::optional<dims> broadcastDims(const Value *other, const Anchor &a) {
  const std::vector<int64_t> os = sizesOf(other), &gs = a.graphShape;
  if (os.size() > gs.size())
    return std::nullopt;
  dims b(gs.size() - os.size(), 1);
  b.insert(b.end(), os.begin(), os.end());
  bool allOnes = true;
  for (size_t i = 0; i < gs.size(); ++i) {
    if (b[i] != 1 && b[i] != gs[i])
      return std::nullopt;
    allOnes &= b[i] == 1;
  }
  if (gs == a.dstDims)
    return b;
  if (allOnes)
    return dims(a.dstDims.size(), 1);
  // A product with its leading dims collapsed into rows ([B, M, N] as
  // [B*M, N]): the other operand is per column, or full.
  if (a.dstDims.size() == 2 && gs.size() > 2 && gs.back() == a.dstDims[1] &&
      product(dims(gs.begin(), gs.end() - 1)) == a.dstDims[0]) {
    const dims lead(b.begin(), b.end() - 1);
    if (std::all_of(lead.begin(), lead.end(), [](int64_t d) { return d == 1; }))
      return dims{1, b.back()};
    if (lead == dims(gs.begin(), gs.end() - 1))
      return dims{a.dstDims[0], b.back()};
    return std::nullopt;
  }
  if (b == gs)
    return a.dstDims;
  return std::nullopt;
}

} // namespace

/// The post-ops computing `n` from `chain` (the previous result), or
/// nullopt when `n` does not map.
std::optional<std::vector<PostOp>> mapEpilogueNode(const Node &n, const Value *chain,
                                                   const Anchor &a) {
  if (n.numResults() != 1 || n.result()->type() != chain->type() ||
      chain->type().dtype != DType::F32)
    return std::nullopt;
  if (n.numOperands() == 1) {
    if (n.operand(0) != chain)
      return std::nullopt;
    switch (n.kind()) {
    case OpKind::Relu:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_relu)};
    case OpKind::LeakyRelu:
      return std::vector<PostOp>{
          eltwise(algorithm::eltwise_relu, static_cast<float>(LeakyReluOp(n).alpha()))};
    case OpKind::Clip: {
      ClipOp op(n);
      return std::vector<PostOp>{eltwise(algorithm::eltwise_clip_v2, static_cast<float>(op.min()),
                                         static_cast<float>(op.max()))};
    }
    case OpKind::Sigmoid:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_logistic)};
    case OpKind::Tanh:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_tanh)};
    case OpKind::Gelu: {
      const std::string &approx = GeluOp(n).approximate();
      if (approx == "none")
        return std::vector<PostOp>{eltwise(algorithm::eltwise_gelu_erf)};
      if (approx == "tanh")
        return std::vector<PostOp>{eltwise(algorithm::eltwise_gelu_tanh)};
      return std::nullopt;
    }
    case OpKind::Elu:
      return std::vector<PostOp>{
          eltwise(algorithm::eltwise_elu, static_cast<float>(EluOp(n).alpha()))};
    case OpKind::HardSwish:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_hardswish)};
    case OpKind::HardSigmoid: {
      HardSigmoidOp op(n);
      return std::vector<PostOp>{eltwise(algorithm::eltwise_linear, static_cast<float>(op.alpha()),
                                         static_cast<float>(op.beta())),
                                 eltwise(algorithm::eltwise_clip_v2, 0.f, 1.f)};
    }
    case OpKind::Abs:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_abs)};
    case OpKind::Sqrt:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_sqrt)};
    case OpKind::Exp:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_exp)};
    case OpKind::Log:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_log)};
    case OpKind::Softplus:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_soft_relu)};
    default:
      return std::nullopt;
    }
  }
  if (n.numOperands() != 2)
    return std::nullopt;
  const bool chainFirst = n.operand(0) == chain;
  if (chainFirst == (n.operand(1) == chain))
    return std::nullopt; // neither, or both operands
  const Value *other = n.operand(chainFirst ? 1 : 0);
  if (other->type().dtype != DType::F32 || !other->type().isStatic())
    return std::nullopt;
  auto bdims = broadcastDims(other, a);
  if (!bdims)
    return std::nullopt;
  PostOp p;
  p.kind = PostOp::Kind::Binary;
  p.other = other;
  p.constant = constantOf(other);
  p.otherDims = *bdims;
  std::vector<PostOp> ops;
  switch (n.kind()) {
  case OpKind::Add:
    p.alg = algorithm::binary_add;
    break;
  case OpKind::Sub:
    // `other - chain` is refused by the fusion planner (F3), so only
    // `chain - other` reaches here; refuse the other order too.
    if (!chainFirst)
      return std::nullopt;
    p.alg = algorithm::binary_sub;
    break;
  case OpKind::Div: // `chain / other` only, like sub
    if (!chainFirst)
      return std::nullopt;
    p.alg = algorithm::binary_div;
    break;
  case OpKind::Mul:
    p.alg = algorithm::binary_mul;
    break;
  case OpKind::Max:
    p.alg = algorithm::binary_max;
    break;
  case OpKind::Min:
    p.alg = algorithm::binary_min;
    break;
  default:
    return std::nullopt;
  }
  ops.push_back(std::move(p));
  return ops;
}

} // namespace onednn
} // namespace kiln::codegen::cpu
