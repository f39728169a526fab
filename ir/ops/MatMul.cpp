//===- MatMul.cpp - matmul and gemm ------------------------------*- C++ -*-===//
//
// Type inference and reference kernels of matmul (numpy semantics, batch
// dims broadcast) and gemm (ONNX Gemm). Both run in their compute type
// (Note [Compute types] in ComputeBuffers.h) on the blocked GEMM.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/ComputeBuffers.h"
#include "ir/ops/Internal.h"

#include <algorithm>

namespace kiln {

using namespace ops;

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

// numpy matmul: a 1-D lhs [K] acts as [1, K] and a 1-D rhs [K] as [K, 1],
// the added dim being dropped from the result; leading dims are batch dims
// and broadcast.
FailureOr<std::vector<TensorType>> inferMatMul(const OpContext &ctx) {
  const TensorType &a = ctx.operandType(0), &b = ctx.operandType(1);
  if (a.dtype == DType::Bool)
    return ctx.emitError() << "operands must be numeric, got " << a.str();
  if (failed(requireSameDType(ctx)))
    return failure();
  if (a.rank() == 0 || b.rank() == 0)
    return ctx.emitError() << "operands must have rank >= 1, got " << a.str() << " and " << b.str();
  Shape lhs = a.shape, rhs = b.shape;
  if (a.rank() == 1)
    lhs.insert(lhs.begin(), Dim(1));
  if (b.rank() == 1)
    rhs.push_back(Dim(1));
  const Dim &ka = lhs.back(), &kb = rhs[rhs.size() - 2];
  if (ka.isStatic() && kb.isStatic() && ka != kb)
    return ctx.emitError() << "contracting dims " << ka.size() << " and " << kb.size()
                           << " do not match in " << a.str() << " x " << b.str();
  ctx.assumeEqual(ka, kb);
  const Shape lhsBatch(lhs.begin(), lhs.end() - 2), rhsBatch(rhs.begin(), rhs.end() - 2);
  // Report batch mismatches in terms of the operands; broadcastShapes below
  // only merges what is known to be compatible.
  for (size_t i = 1; i <= std::min(lhsBatch.size(), rhsBatch.size()); ++i) {
    const Dim &p = lhsBatch[lhsBatch.size() - i], &q = rhsBatch[rhsBatch.size() - i];
    if (p.isStatic() && q.isStatic() && p != q && p.size() != 1 && q.size() != 1)
      return ctx.emitError() << "batch dims of " << a.str() << " and " << b.str()
                             << " are not broadcastable (" << p.size() << " vs " << q.size() << ")";
  }
  const std::vector<TensorType> batchTypes{TensorType(a.dtype, lhsBatch),
                                           TensorType(b.dtype, rhsBatch)};
  auto batch = broadcastShapes(ctx, batchTypes);
  if (failed(batch))
    return failure();
  Shape out = *batch;
  if (a.rank() >= 2)
    out.push_back(lhs[lhs.size() - 2]);
  if (b.rank() >= 2)
    out.push_back(rhs.back());
  return std::vector<TensorType>{TensorType(a.dtype, std::move(out))};
}

FailureOr<std::vector<Tensor>> referenceMatMul(const OpContext &, std::span<const Tensor> inputs,
                                               std::span<const TensorType> resultTypes) {
  const Tensor &a = inputs[0], &b = inputs[1];
  std::vector<int64_t> lhs = a.shape(), rhs = b.shape();
  if (lhs.size() == 1)
    lhs.insert(lhs.begin(), 1);
  if (rhs.size() == 1)
    rhs.push_back(1);
  const int64_t m = lhs[lhs.size() - 2], depth = lhs.back(), n = rhs.back();
  const std::vector<int64_t> lhsBatch(lhs.begin(), lhs.end() - 2);
  const std::vector<int64_t> rhsBatch(rhs.begin(), rhs.end() - 2);
  std::vector<int64_t> batch(std::max(lhsBatch.size(), rhsBatch.size()), 1);
  for (size_t i = 1; i <= lhsBatch.size(); ++i)
    batch[batch.size() - i] = lhsBatch[lhsBatch.size() - i];
  for (size_t i = 1; i <= rhsBatch.size(); ++i)
    if (rhsBatch[rhsBatch.size() - i] != 1)
      batch[batch.size() - i] = rhsBatch[rhsBatch.size() - i];

  Tensor y = Tensor::zeros(resultTypes[0].dtype, staticSizes(resultTypes[0].shape));
  if (y.numel() == 0)
    return std::vector<Tensor>{y};
  withComputeType(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    InputBuffer<T> ab(a), bb(b);
    OutputBuffer<T> yb(y);
    std::vector<int64_t> idx(batch.size(), 0);
    int64_t flat = 0;
    do {
      const T *ap = ab.data() + broadcastOffset(idx, lhsBatch) * m * depth;
      const T *bp = bb.data() + broadcastOffset(idx, rhsBatch) * depth * n;
      gemmAccumulate(m, n, depth, ap, depth, 1, bp, n, yb.data() + flat * m * n, n);
      ++flat;
    } while (nextIndex(idx, batch));
    yb.finish();
  });
  return std::vector<Tensor>{y};
}

//===----------------------------------------------------------------------===//
// gemm
//===----------------------------------------------------------------------===//

// Y = alpha * A' * B' + beta * C, with A' = trans_a ? A^T : A (an [M, K]
// matrix), B' likewise [K, N], and C unidirectionally broadcast to [M, N].
FailureOr<std::vector<TensorType>> inferGemm(const OpContext &ctx) {
  GemmOp op(ctx);
  const TensorType &a = ctx.operandType(0), &b = ctx.operandType(1);
  if (failed(requireFloat(ctx, 0)) || failed(requireSameDType(ctx)))
    return failure();
  if (a.rank() != 2 || b.rank() != 2)
    return ctx.emitError() << "A and B must be 2-D, got " << a.str() << " and " << b.str();
  const Dim &m = a.shape[op.trans_a() ? 1 : 0], &ka = a.shape[op.trans_a() ? 0 : 1];
  const Dim &kb = b.shape[op.trans_b() ? 1 : 0], &n = b.shape[op.trans_b() ? 0 : 1];
  if (ka.isStatic() && kb.isStatic() && ka != kb)
    return ctx.emitError() << "contracting dims " << ka.size() << " and " << kb.size()
                           << " do not match in " << a.str()
                           << " (trans_a = " << (op.trans_a() ? "true" : "false") << ") x "
                           << b.str() << " (trans_b = " << (op.trans_b() ? "true" : "false") << ")";
  ctx.assumeEqual(ka, kb);
  Shape out{m, n};
  if (ctx.numOperands() == 3) {
    const TensorType &c = ctx.operandType(2);
    bool ok = c.rank() <= 2;
    for (int64_t i = 1; ok && i <= c.rank(); ++i) {
      const Dim &cd = c.shape[static_cast<size_t>(c.rank() - i)];
      const Dim &od = out[static_cast<size_t>(2 - i)];
      ok = cd.isSymbolic() || cd.size() == 1 || od.isSymbolic() || cd == od;
    }
    if (!ok)
      return ctx.emitError() << "C " << c.str() << " does not broadcast to the result shape "
                             << shapeStr(out);
  }
  return std::vector<TensorType>{TensorType(a.dtype, std::move(out))};
}

FailureOr<std::vector<Tensor>> referenceGemm(const OpContext &ctx, std::span<const Tensor> inputs,
                                             std::span<const TensorType> resultTypes) {
  GemmOp op(ctx);
  const Tensor &a = inputs[0], &b = inputs[1];
  const bool transA = op.trans_a(), transB = op.trans_b();
  const int64_t m = a.dim(transA ? 1 : 0), depth = a.dim(transA ? 0 : 1);
  const int64_t n = b.dim(transB ? 0 : 1);
  Tensor y = Tensor::zeros(resultTypes[0].dtype, staticSizes(resultTypes[0].shape));
  if (y.numel() == 0)
    return std::vector<Tensor>{y};
  withFloatComputeType(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    InputBuffer<T> ab(a), bb(b);
    // The GEMM kernel wants B' row-major; transpose it once.
    std::vector<T> bt;
    const T *bp = bb.data();
    if (transB) {
      bt.resize(static_cast<size_t>(depth * n));
      for (int64_t k = 0; k < depth; ++k)
        for (int64_t j = 0; j < n; ++j)
          bt[static_cast<size_t>(k * n + j)] = bp[j * depth + k];
      bp = bt.data();
    }
    std::vector<T> product(static_cast<size_t>(m * n), T(0));
    gemmAccumulate(m, n, depth, ab.data(), transA ? 1 : depth, transA ? m : 1, bp, n,
                   product.data(), n);
    const T alpha = static_cast<T>(op.alpha()), beta = static_cast<T>(op.beta());
    OutputBuffer<T> yb(y);
    std::optional<InputBuffer<T>> cb;
    std::vector<int64_t> cShape;
    if (inputs.size() == 3) {
      cb.emplace(inputs[2]);
      cShape = inputs[2].shape();
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T v = alpha * product[static_cast<size_t>(i * n + j)];
        if (cb)
          v += beta * cb->data()[broadcastOffset({i, j}, cShape)];
        yb.data()[i * n + j] = v;
      }
    yb.finish();
  });
  return std::vector<Tensor>{y};
}

} // namespace kiln
