//===- DecomposeMatMul.cpp - matmul and gemm as a product and a sum -*- C++ -*-===//
//
// For a target without a library GEMM (the CUDA backend, until it calls
// cuBLASLt: codegen/CudaProgram.cpp runs this pass), a matmul becomes
// elementwise products broadcast over a [..., M, K, N] space and a sum
// over K, which the fusion planner makes one reduction kernel (outer
// [..., M, N], inner K), so every matrix product runs as generated code:
//
//   %c = matmul(%a, %b) : f32[4,3]                    // a: [4,8], b: [8,3]
//
//   %a3 = unsqueeze(%a) {axes = [2]} : f32[4,8,1]
//   %b3 = unsqueeze(%b) {axes = [0]} : f32[1,8,3]
//   %p = mul(%a3, %b3) : f32[4,8,3]
//   %c = reduce_sum(%p) {axes = [1], keepdims = false} : f32[4,3]
//
// Leading (batch) dims broadcast as matmul's do. A gemm's transposes are
// transpose nodes, alpha and beta multiplications by scalar constants
// (left out where 1), C added (left out where beta is 0). The sum is a
// reduction's: summed in an order of the backend's choosing, within
// reduce_sum's bound of the op table.
//
// Conditions: both matmul operands of rank >= 2 (1-D operands keep their
// matmul), float dtypes. Not in the default pipeline: the CPU backend runs
// products through oneDNN.
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "decompose-matmul"

#include "ir/Builder.h"
#include "passes/Internal.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

namespace kiln {
namespace {

class DecomposeMatMulPass : public Pass {
public:
  DecomposeMatMulPass() : Pass(kDecomposeMatMulSpec.name, kDecomposeMatMulSpec.description) {}

  PassResult run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodeList()) {
      if ((n->kind() == OpKind::MatMul || n->kind() == OpKind::Gemm) &&
          succeeded(decompose(g, *n, ctx.diag()))) {
        ++numDecomposed;
        changed = true;
      }
    }
    return PassResult::success(changed);
  }

private:
  /// a @ b for operands of rank >= 2, or null.
  static Value *product(Builder &b, Value *x, Value *y) {
    const int64_t rx = x->type().rank(), ry = y->type().rank();
    Value *x3 = b.createValue(OpKind::Unsqueeze, {x}, {{"axes", std::vector<int64_t>{rx}}});
    Value *y3 = b.createValue(OpKind::Unsqueeze, {y}, {{"axes", std::vector<int64_t>{ry - 2}}});
    Value *p = x3 && y3 ? b.createValue(OpKind::Mul, {x3, y3}) : nullptr;
    const int64_t rp = p ? p->type().rank() : 0;
    return p ? b.createValue(OpKind::ReduceSum, {p},
                             {{"axes", std::vector<int64_t>{rp - 2}}, {"keepdims", false}})
             : nullptr;
  }

  static Value *scaled(Builder &b, Value *v, double factor) {
    if (factor == 1.0 || !v)
      return v;
    Tensor s = Tensor::zeros(v->type().dtype, {});
    s.setDouble(0, factor);
    return b.createValue(OpKind::Mul, {v, b.constant(std::move(s))});
  }

  /// Rewrites `n` when the conditions hold; failure (no diagnostic) means
  /// "leave it".
  LogicalResult decompose(Graph &g, Node &n, DiagnosticEngine &diag) {
    Value *a = n.operand(0), *bv = n.operand(1);
    const DType dt = n.result()->type().dtype;
    if (!isFloat(dt) || a->type().rank() < 2 || bv->type().rank() < 2)
      return failure();
    Builder b(g, diag);
    b.setInsertionPoint(&n);
    b.setLoc(n.loc());
    Value *y = nullptr;
    if (n.kind() == OpKind::MatMul) {
      y = product(b, a, bv);
    } else {
      const GemmOp op(n);
      const std::vector<int64_t> swap{1, 0};
      if (op.trans_a())
        a = b.createValue(OpKind::Transpose, {a}, {{"perm", swap}});
      if (op.trans_b())
        bv = b.createValue(OpKind::Transpose, {bv}, {{"perm", swap}});
      y = a && bv ? scaled(b, product(b, a, bv), op.alpha()) : nullptr;
      if (y && n.numOperands() > 2 && op.beta() != 0.0) {
        Value *c = scaled(b, n.operand(2), op.beta());
        y = c ? b.createValue(OpKind::Add, {y, c}) : nullptr;
      }
    }
    if (!y || y->type() != n.result()->type()) // not expected: the ops' types agree
      return failure();
    passes::replaceValue(n.result(), y);
    return success();
  }

  Statistic numDecomposed{this, "num-decomposed", "Matmuls and gemms written as mul and sum"};
};

} // namespace

std::unique_ptr<Pass> createDecomposeMatMulPass() {
  return std::make_unique<DecomposeMatMulPass>();
}

} // namespace kiln
