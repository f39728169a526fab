//===- FoldBatchNorm.cpp - Fold inference batch norm into weights -*- C++ -*-===//
//
// An inference batch_norm is a per-channel affine map
//   y = (x - mean) * s + bias,   s = scale / sqrt(var + epsilon),
// so when x is produced by a linear op with constant weights it can be
// folded into those weights at compile time, and the batch_norm disappears:
//
//   conv:    W'[m, ...] = W[m, ...] * s[m];  b'[m] = (b[m] - mean[m]) * s[m] + bias[m]
//   conv_transpose (weight [C, M/group, k...]): W'[c, j, ...] = W[c, j, ...] * s[m]
//            with m = group(c) * M/group + j; b' as for conv
//   gemm (2-D result, channel = column n): B' scaled per column n;
//            C' = (beta * C - mean) * s + bias broadcast to [N] or [M, N],
//            alpha kept, beta = 1
//   matmul (2-D result [M, N], 2-D constant B [K, N]): B' scaled per column,
//            and `add(matmul, b')` with b'[n] = bias[n] - mean[n] * s[n]
//
// Algorithm:
//   1. Walk the nodes in order; take each batch_norm whose x is the only
//      use of a conv / conv_transpose / gemm / matmul result.
//   2. Require the weight (and bias / C when present) and the four
//      batch_norm parameters to be constants with float dtypes.
//   3. Compute the new constants in double, round once to the dtype, build
//      the new node before the old one with the old attributes and
//      location, move all uses and the name of the batch_norm result to it,
//      and erase the batch_norm and the nodes it left dead.
//
// Requires: a verified graph. Establishes: no foldable batch_norm is left.
//
//   %y = conv(%x, %w, %b) : f32[1,8,6,6]           // before
//   %z = batch_norm(%y, %s, %t, %m, %v) : f32[1,8,6,6]
//   return %z
//
//   %z = conv(%x, %w', %b') : f32[1,8,6,6]        // after (new constants)
//   return %z
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "fold-batch-norm"

#include "ir/Builder.h"
#include "passes/Internal.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

#include <cmath>

namespace kiln {
namespace {

using passes::constantValue;

/// True when every operand of `n` in [first, end) is a float constant.
bool allFloatConstants(const Node &n, unsigned first) {
  for (unsigned i = first; i < n.numOperands(); ++i) {
    const Tensor *t = constantValue(n.operand(i));
    if (!t || !isFloat(t->dtype()))
      return false;
  }
  return true;
}

class FoldBatchNormPass : public Pass {
public:
  FoldBatchNormPass() : Pass(kFoldBatchNormSpec.name, kFoldBatchNormSpec.description) {}

  PassResult run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *bn : g.nodeList()) {
      if (bn->kind() != OpKind::BatchNorm)
        continue;
      Value *x = bn->operand(0);
      Node *producer = x->definingNode();
      if (!producer || !x->hasOneUse() || x->isGraphOutput() || !allFloatConstants(*bn, 1) ||
          !x->type().isStatic())
        continue;
      if (failed(fold(g, *bn, *producer, ctx.diag())))
        continue;
      ++numFolded;
      changed = true;
    }
    return PassResult::success(changed);
  }

private:
  /// Per-channel multiplier s and shift t of the batch_norm: y = x * s + t.
  static void affine(const Node &bn, std::vector<double> &s, std::vector<double> &t) {
    const Tensor &bias = *constantValue(bn.operand(2)), &mean = *constantValue(bn.operand(3));
    const int64_t channels = constantValue(bn.operand(1))->numel();
    s.resize(static_cast<size_t>(channels));
    t.resize(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      const double mul = passes::batchNormMultiplier(bn, c);
      s[static_cast<size_t>(c)] = mul;
      t[static_cast<size_t>(c)] = bias.getDouble(c) - mean.getDouble(c) * mul;
    }
  }

  /// Folds `bn` into `producer` when the producer's kind and operands
  /// allow; failure (no diagnostic) means "leave it".
  LogicalResult fold(Graph &g, Node &bn, Node &producer, DiagnosticEngine &diag) {
    std::vector<double> s, t;
    switch (producer.kind()) {
    case OpKind::Conv:
    case OpKind::ConvTranspose:
      if (!allFloatConstants(producer, 1))
        return failure();
      affine(bn, s, t);
      return foldConv(g, bn, producer, s, t, diag);
    case OpKind::Gemm:
      if (!allFloatConstants(producer, 1) || producer.result()->type().rank() != 2)
        return failure();
      affine(bn, s, t);
      return foldGemm(g, bn, producer, s, t, diag);
    case OpKind::MatMul:
      if (!allFloatConstants(producer, 1) || producer.result()->type().rank() != 2 ||
          producer.operand(1)->type().rank() != 2)
        return failure();
      affine(bn, s, t);
      return foldMatMul(g, bn, producer, s, t, diag);
    default:
      return failure();
    }
  }

  /// Replaces `bn`'s result by `replacement` and erases what died.
  static void finish(Node &bn, Node &producer, Value *replacement) {
    replacement->definingNode()->setLoc(producer.loc());
    passes::replaceValue(bn.result(), replacement);
  }

  /// Creates a node like `old` with new operands, before `old`.
  static Node *cloneWithOperands(Graph &g, Node &old, std::vector<Value *> operands,
                                 std::vector<Attribute> attrs) {
    return g.createNode(old.info(), std::move(operands), {old.result()->type()}, std::move(attrs),
                        old.loc(), &old);
  }

  LogicalResult foldConv(Graph &g, Node &bn, Node &conv, const std::vector<double> &s,
                         const std::vector<double> &t, DiagnosticEngine &diag) {
    const bool isTranspose = conv.kind() == OpKind::ConvTranspose;
    const Tensor &w = *constantValue(conv.operand(1));
    const int64_t outChannels = conv.result()->type().shape[1].size();
    if (static_cast<int64_t>(s.size()) != outChannels || w.rank() < 2)
      return failure();
    const int64_t group = isTranspose ? ConvTransposeOp(conv).group() : ConvOp(conv).group();
    Tensor nw = w.clone();
    const int64_t d0 = w.dim(0), d1 = w.dim(1), inner = w.numel() / std::max<int64_t>(1, d0 * d1);
    for (int64_t i = 0; i < d0; ++i)
      for (int64_t j = 0; j < d1; ++j) {
        // conv: dim 0 is the output channel; conv_transpose: (group of i, j).
        const int64_t m = isTranspose ? (i / (d0 / group)) * d1 + j : i;
        const double mul = s[static_cast<size_t>(m)];
        for (int64_t k = 0; k < inner; ++k) {
          const int64_t off = (i * d1 + j) * inner + k;
          nw.setDouble(off, w.getDouble(off) * mul);
        }
      }
    Tensor nb = Tensor::zeros(w.dtype(), {outChannels});
    const Tensor *b = conv.numOperands() == 3 ? constantValue(conv.operand(2)) : nullptr;
    for (int64_t m = 0; m < outChannels; ++m)
      nb.setDouble(m, (b ? b->getDouble(m) : 0.0) * s[static_cast<size_t>(m)] +
                          t[static_cast<size_t>(m)]);
    Builder builder(g, diag);
    builder.setInsertionPoint(&conv);
    builder.setLoc(conv.loc());
    Value *wv =
        builder.constant(std::move(nw), passes::derivedConstantName(conv.operand(1), "folded"));
    Value *bv =
        builder.constant(std::move(nb), passes::derivedConstantName(conv.operand(1), "bias"));
    std::vector<Attribute> attrs(conv.attrs().begin(), conv.attrs().end());
    Node *n = cloneWithOperands(g, conv, {conv.operand(0), wv, bv}, std::move(attrs));
    finish(bn, conv, n->result());
    return success();
  }

  LogicalResult foldGemm(Graph &g, Node &bn, Node &gemm, const std::vector<double> &s,
                         const std::vector<double> &t, DiagnosticEngine &diag) {
    GemmOp op(gemm);
    const Tensor &b = *constantValue(gemm.operand(1));
    const std::vector<int64_t> outShape = staticSizes(gemm.result()->type().shape);
    const int64_t rows = outShape[0], cols = outShape[1];
    if (static_cast<int64_t>(s.size()) != cols)
      return failure();
    Tensor nb = b.clone();
    for (int64_t i = 0; i < b.dim(0); ++i)
      for (int64_t j = 0; j < b.dim(1); ++j) {
        const int64_t n = op.trans_b() ? i : j, off = i * b.dim(1) + j;
        nb.setDouble(off, b.getDouble(off) * s[static_cast<size_t>(n)]);
      }
    // C' = (beta * C) * s + t, as [N] unless C varies along rows.
    const Tensor *c = gemm.numOperands() == 3 ? constantValue(gemm.operand(2)) : nullptr;
    const bool perRow = c && c->rank() == 2 && c->dim(0) != 1;
    Tensor nc = perRow ? Tensor::zeros(b.dtype(), {rows, cols}) : Tensor::zeros(b.dtype(), {cols});
    for (int64_t i = 0; i < (perRow ? rows : 1); ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double cv = 0;
        if (c) {
          const int64_t ci = c->rank() == 2 && c->dim(0) != 1 ? i : 0;
          const int64_t cj = c->rank() >= 1 && c->dim(c->rank() - 1) != 1 ? j : 0;
          const int64_t cCols = c->rank() >= 1 ? c->dim(c->rank() - 1) : 1;
          cv = c->getDouble(ci * cCols + cj) * op.beta();
        }
        nc.setDouble(i * cols + j, cv * s[static_cast<size_t>(j)] + t[static_cast<size_t>(j)]);
      }
    Builder builder(g, diag);
    builder.setInsertionPoint(&gemm);
    builder.setLoc(gemm.loc());
    Value *bv =
        builder.constant(std::move(nb), passes::derivedConstantName(gemm.operand(1), "folded"));
    Value *cv =
        builder.constant(std::move(nc), passes::derivedConstantName(gemm.operand(1), "bias"));
    std::vector<Attribute> attrs(gemm.attrs().begin(), gemm.attrs().end());
    attrs[GemmOp::beta_index] = 1.0;
    Node *n = cloneWithOperands(g, gemm, {gemm.operand(0), bv, cv}, std::move(attrs));
    finish(bn, gemm, n->result());
    return success();
  }

  LogicalResult foldMatMul(Graph &g, Node &bn, Node &mm, const std::vector<double> &s,
                           const std::vector<double> &t, DiagnosticEngine &diag) {
    const Tensor &b = *constantValue(mm.operand(1));
    const int64_t cols = b.dim(1);
    if (static_cast<int64_t>(s.size()) != cols)
      return failure();
    Tensor nb = b.clone();
    for (int64_t i = 0; i < b.dim(0); ++i)
      for (int64_t j = 0; j < cols; ++j)
        nb.setDouble(i * cols + j, b.getDouble(i * cols + j) * s[static_cast<size_t>(j)]);
    Tensor shift = Tensor::zeros(b.dtype(), {cols});
    for (int64_t j = 0; j < cols; ++j)
      shift.setDouble(j, t[static_cast<size_t>(j)]);
    Builder builder(g, diag);
    builder.setInsertionPoint(&mm);
    builder.setLoc(mm.loc());
    Value *bv =
        builder.constant(std::move(nb), passes::derivedConstantName(mm.operand(1), "folded"));
    Value *sv =
        builder.constant(std::move(shift), passes::derivedConstantName(mm.operand(1), "bias"));
    Node *n = cloneWithOperands(g, mm, {mm.operand(0), bv}, {});
    // The add goes right after the new matmul (before the old one).
    builder.setInsertionPoint(&mm);
    Value *sum = builder.createValue(OpKind::Add, {n->result(), sv});
    if (!sum)
      return failure();
    finish(bn, mm, sum);
    return success();
  }

  Statistic numFolded{this, "num-folded", "Batch norms folded into weights"};
};

} // namespace

std::unique_ptr<Pass> createFoldBatchNormPass() {
  return std::make_unique<FoldBatchNormPass>();
}

} // namespace kiln
