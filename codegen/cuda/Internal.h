//===- Internal.h - Private to codegen/cuda/ --------------------*- C++ -*-===//
//
// The writer CudaEmitter.cpp (kernel structure, memory, types) and
// EmitScalar.cpp (one hook per scalar primitive) implement together.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cuda/CudaEmitter.h"

#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::codegen::cuda {

class CudaWriter {
public:
  explicit CudaWriter(const Kernel &k);

  /// The kernel's function and the helpers before it; false on error().
  bool write(const std::string &symbol, CudaKernel &out);
  const std::string &error() const { return error_; }

  // For the scalar hooks (EmitScalar.cpp).
  const Kernel &kernel() const { return k_; }
  /// The C type a register of `t` has: float for the floats narrower than
  /// 32 bits (rounded after every node), a byte for the sub-byte integers.
  static std::string regType(DType t);
  /// The unsigned type integer arithmetic on `t` wraps in.
  static std::string wrapType(DType t);
  /// `e` rounded to `t` (f16, bf16, mini floats); others unchanged.
  std::string roundTo(DType t, const std::string &e);
  /// Note [Scalar casts] in ir/ScalarExpr.h.
  std::string convert(const std::string &v, DType from, DType to);
  std::string constant(DType t, double f, int64_t i);
  /// A libm-class function `fn` (its double name: exp, pow): float
  /// operands at their width and rounded to `t`, integers through double.
  std::string mathCall(const char *fn, DType t, const std::string &a,
                       const std::string *b = nullptr);
  /// Index, Load, StageValue and Size nodes.
  std::string leaf(const ScalarNode &n);
  std::string fail(const std::string &msg);

private:
  std::string ref(ScalarRef r);
  std::string emitNode(const ScalarNode &n, ScalarRef r);
  void line(const std::string &text);
  void open(const std::string &head);
  void close();
  void hoist(const std::vector<ScalarRef> &roots);
  std::string extent(const DimExpr &e);
  std::string loadExpr(DType t, const std::string &ptr);
  std::string storeExpr(DType t, const std::string &v);
  std::string identity(ReduceKind kind, DType t);
  std::string combine(ReduceKind kind, DType t, const std::string &acc, const std::string &v);
  void writeDigits(const std::string &o, const std::string &idxType);
  /// The dtype `s` stores: its output's, checked against its value's
  /// (nullopt after fail()).
  std::optional<DType> storeType(const Store &s);
  void writeStores(const Stage &st);
  void writeRowKernel(CudaForm form);
  void writePointwise();
  bool writeVectorPointwise();
  std::string miniFloatHelpers();

  const Kernel &k_;
  std::ostringstream body_;
  std::string error_;
  int level_ = 0;
  /// Per DAG node: the scope level it was emitted at, or -1.
  std::vector<int> emittedAt_;
  std::vector<bool> readsInner_;
  /// The mini float dtypes the kernel uses (their helpers are written).
  std::set<DType> miniFloats_;
  /// The inner index's name while inside a stage's loop, else empty.
  std::string inner_;
  /// Note [Vectorized pointwise kernels]: the loads read as lanes of one
  /// 128-bit load (by node), while `lanes_` is set.
  std::set<int32_t> vectorLoads_;
  bool lanes_ = false;
};

using CudaHook = std::string (*)(CudaWriter &, const ScalarNode &, const std::string *args,
                                 DType argType);
/// The hook of one row of ir/ScalarOps.def (EmitScalar.cpp).
CudaHook cudaScalarHook(ScalarOp op);

} // namespace kiln::codegen::cuda
