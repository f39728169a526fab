//===- LowerBatchNorm.cpp - batch_norm of constants as sub, mul, add -*- C++ -*-===//
//
// An inference batch_norm that fold-batch-norm could not fold into a
// producer's weights (DenseNet's after a concat, one of a graph input or
// of an activation) computes, per element,
//   y = (x - mean[c]) * (scale[c] / sqrt(var[c] + epsilon)) + bias[c]
// where the multiplier is a constant when scale and var are. Kernels
// computed it per call (a sqrt and a division per channel, in a table:
// Note [Values of the inner index alone, in a table], whose filling loop
// LLVM unrolls over every channel) and oneDNN cannot take a batch_norm as
// a post-op. So the pass computes the multiplier at compile time, in double
// rounded once to x's dtype (the kernel rounded the sqrt, the sum and the
// quotient in f32), and writes the batch_norm as three elementwise ops on
// per-channel constants of shape [C, 1, ...] (broadcast over the dims
// after the channel dim 1):
//
//   %y = batch_norm(%x, %scale, %bias, %mean, %var) : f32[1,8,6,6]   // before
//
//   %d = sub(%x, %mean')  : f32[1,8,6,6]                              // after
//   %p = mul(%d, %s')     : f32[1,8,6,6]        s' = scale / sqrt(var + eps)
//   %y = add(%p, %bias')  : f32[1,8,6,6]
//
// x - mean stays a subtraction, as in the reference kernel (a shift
// bias - mean * s' would cancel where x is close to mean). Conditions:
// the four parameters are constants, x is f32 or f64 (f16 and bf16 kernels
// round after every elementwise op, where batch_norm rounds once), of rank
// >= 2 with a static channel dim.
//
// Requires: a verified graph; fold-batch-norm first (it folds into conv,
// gemm and matmul weights, which is cheaper still). Establishes: no
// batch_norm with constant parameters on f32 or f64 with a static channel
// dim is left.
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "lower-batch-norm"

#include "ir/Builder.h"
#include "passes/Internal.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

namespace kiln {
namespace {

using passes::constantValue;

class LowerBatchNormPass : public Pass {
public:
  LowerBatchNormPass() : Pass(kLowerBatchNormSpec.name, kLowerBatchNormSpec.description) {}

  PassResult run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *bn : g.nodeList())
      if (bn->kind() == OpKind::BatchNorm && succeeded(lower(g, *bn, ctx.diag()))) {
        ++numLowered;
        changed = true;
      }
    return PassResult::success(changed);
  }

private:
  /// Rewrites `bn` when its conditions hold; failure (no diagnostic) means
  /// "leave it".
  LogicalResult lower(Graph &g, Node &bn, DiagnosticEngine &diag) {
    Value *x = bn.operand(0);
    const DType dt = x->type().dtype;
    if ((dt != DType::F32 && dt != DType::F64) || x->type().rank() < 2)
      return failure();
    // Every parameter has x's channel count, and it is static (a symbolic
    // channel dim lets the verifier accept parameters of any one length).
    const Dim &channelDim = x->type().shape[1];
    if (!channelDim.isStatic())
      return failure();
    const int64_t channels = channelDim.size();
    for (unsigned i = 1; i < 5; ++i) {
      const Tensor *t = constantValue(bn.operand(i));
      if (!t || t->numel() != channels)
        return failure();
    }
    const Tensor &bias = *constantValue(bn.operand(2)), &mean = *constantValue(bn.operand(3));
    // [C, 1, ...]: broadcast against x's dims 1.. (dim 0 is the batch).
    std::vector<int64_t> shape(static_cast<size_t>(x->type().rank() - 1), 1);
    shape[0] = channels;
    Tensor m = Tensor::zeros(dt, shape), s = Tensor::zeros(dt, shape), b = Tensor::zeros(dt, shape);
    for (int64_t c = 0; c < channels; ++c) {
      m.setDouble(c, mean.getDouble(c));
      s.setDouble(c, passes::batchNormMultiplier(bn, c));
      b.setDouble(c, bias.getDouble(c));
    }
    Builder builder(g, diag);
    builder.setInsertionPoint(&bn);
    builder.setLoc(bn.loc());
    Value *mv =
        builder.constant(std::move(m), passes::derivedConstantName(bn.operand(3), "lowered"));
    Value *sv =
        builder.constant(std::move(s), passes::derivedConstantName(bn.operand(1), "multiplier"));
    Value *bv =
        builder.constant(std::move(b), passes::derivedConstantName(bn.operand(2), "lowered"));
    Value *d = builder.createValue(OpKind::Sub, {x, mv});
    Value *prod = d ? builder.createValue(OpKind::Mul, {d, sv}) : nullptr;
    Value *y = prod ? builder.createValue(OpKind::Add, {prod, bv}) : nullptr;
    if (!y) // not expected: the checks above make the types agree
      return failure();
    passes::replaceValue(bn.result(), y);
    return success();
  }

  Statistic numLowered{this, "num-lowered", "Batch norms written as sub, mul and add"};
};

} // namespace

std::unique_ptr<Pass> createLowerBatchNormPass() {
  return std::make_unique<LowerBatchNormPass>();
}

} // namespace kiln
