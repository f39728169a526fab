//===- CudaLibrary.cpp - What the CUDA backend runs through cuBLASLt ------===//
//
// The CUDA backend's library table (codegen/Backend.h): matmul and gemm
// anchor a library group, with no epilogue (the nodes after a product are
// a generated kernel); and the mapping of such a node onto one
// runtime::cuda::GemmCall (runtime/cuda/CublasLt.cpp runs it).
//
// A node maps when its operands and result are f32 (the planner anchors
// library groups on f32) and
//   - matmul: both operands of rank >= 2, each operand's leading (batch)
//     dims either those of the result or all 1 (one stride per operand);
//     a batched A over an unbatched B is one product of batch * M rows;
//   - gemm: C absent, or beta 0, or C of the result's shape (beta * C),
//     or C a row of N values ([N] or [1, N]) with beta 1 (the bias).
// Else cublasLtCall says why, and compileCudaModel writes every product of
// the model as generated code instead (passes/DecomposeMatMul.cpp).
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaProgram.h"
#include "ir/Ops.h"

namespace kiln::codegen {

const LibraryCapabilities &cublasLtCapabilities() {
  static const LibraryOpSupport rows[] = {
      {OpKind::MatMul, /*anchor=*/true},
      {OpKind::Gemm, /*anchor=*/true},
  };
  static const LibraryCapabilities caps("cuBLASLt", rows);
  return caps;
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

} // namespace kiln::codegen
