//===- KernelEmitter.h - The kernel-to-LLVM-IR emitter ----------*- C++ -*-===//
//
// Private to codegen/cpu/: the class that EmitLLVM.cpp (loops, stages,
// memory), InnerIndex.cpp (rewrites that use how a value depends on the
// inner loop index) and EmitScalar.cpp (one hook per scalar primitive of
// ir/ScalarOps.def) implement together. Includes LLVM headers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cpu/Internal.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace kiln::codegen::cpu {

using llvm::Value;

class KernelEmitter {
public:
  KernelEmitter(const Kernel &k, const Schedule &s, const VectorMathIsa &isa, llvm::Module &m)
      : k_(k), s_(s), isa_(isa), m_(m), ctx_(m.getContext()), b_(ctx_) {}

  bool emit(const std::string &symbol);
  const std::string &error() const { return error_; }

  // For the scalar hooks (EmitScalar.cpp).
  llvm::IRBuilder<> &builder() { return b_; }
  llvm::Module &module() { return m_; }
  const Kernel &kernel() const { return k_; }
  const VectorMathIsa &vectorMathIsa() const { return isa_; }
  /// The value of a scalar node, emitted on first use in the current stage.
  Value *get(ScalarRef r);

  // Types.
  llvm::Type *regType(DType t);
  llvm::Type *memType(DType t);
  llvm::Type *i64() { return b_.getInt64Ty(); }

  // Values.
  Value *roundTo(DType t, Value *v);
  /// A float register -> the code of mini float `t` (i8), and back.
  Value *encodeMiniFloat(DType t, Value *v);
  Value *decodeMiniFloat(DType t, Value *code);
  Value *loadElement(DType t, Value *ptr);
  void storeElement(DType t, Value *v, Value *ptr);
  Value *convert(Value *v, DType from, DType to);
  Value *constantOf(DType t, double f, int64_t i);
  Value *mathCall(MathFn fn, DType t, Value *a, Value *b = nullptr);

  /// The leaves the kernel IR defines: loop indices, loads, stage values.
  Value *emitIndex(const ScalarNode &n);
  Value *emitLoad(const ScalarNode &n);
  Value *emitStageValue(const ScalarNode &n);
  Value *emitSize(const ScalarNode &n);

  Value *failValue(const std::string &msg) {
    fail(msg);
    return nullptr;
  }

private:
  Value *emitNode(const ScalarNode &n);
  /// A select chain between loads as one load of a selected address, or
  /// null (Note [Concat as a chosen address] in InnerIndex.cpp).
  Value *emitSelectedLoad(ScalarRef root);
  bool readsInnerIndex(ScalarRef r);
  /// Chooses the values kept in tables, fills the tables before the outer
  /// loop and reads them in inner loops (Note [Values of the inner index
  /// alone, in a table] in InnerIndex.cpp).
  void planTables();
  void fillTables();
  Value *loadFromTable(ScalarRef r);
  /// The inner indices where a condition or clamp of `st` changes (Note
  /// [Inner loops split where a condition changes] in InnerIndex.cpp).
  std::vector<int64_t> innerBreaks(const Stage &st);
  /// Resolves the nodes whose value is known for inner indices [b, e).
  void resolveFor(int64_t b, int64_t e);
  /// Forgets the values emitted so far (a new loop).
  void clearMemo() {
    std::fill(memo_.begin(), memo_.end(), nullptr);
    std::fill(triedSelect_.begin(), triedSelect_.end(), false);
  }

  // Structure.
  using LoopBody =
      std::function<std::vector<Value *>(Value *iv, const std::vector<Value *> &carried)>;
  /// Whether a Reduce stage folds floats with reassociation (sum, prod).
  bool reassociatesReductions() const;
  std::vector<Value *> emitLoop(Value *lo, Value *hi, const std::string &name,
                                const std::vector<Value *> &init, const LoopBody &body,
                                bool innerLoop);
  /// An extent of a kernel with run-time sizes, from the size arguments
  /// (Note [Kernels with run-time sizes] in codegen/RunTimeSizes.cpp).
  Value *extentValue(const DimExpr &e);
  void emitReduceStage(size_t stageIndex, const Stage &st);
  void emitMapStage(const Stage &st);
  bool emitStores(const Stage &st);
  Value *reduceIdentity(ReduceKind kind, DType t);
  Value *reduceCombine(ReduceKind kind, DType t, Value *acc, Value *v);

  bool fail(const std::string &msg) {
    if (error_.empty())
      error_ = msg;
    return false;
  }

  const Kernel &k_;
  const Schedule &s_;
  VectorMathIsa isa_;
  llvm::Module &m_;
  llvm::LLVMContext &ctx_;
  llvm::IRBuilder<> b_;
  std::string error_;

  std::vector<Value *> buffers_;    // inputs then outputs
  std::vector<Value *> outerIndex_; // per outer dim
  Value *innerIndex_ = nullptr;
  std::vector<Value *> sizes_;        // per symbol, loaded at the body's entry
  std::vector<Value *> outerExtents_; // per outer dim
  Value *innerExtent_ = nullptr;
  std::vector<Value *> stageValues_;
  std::vector<Value *> memo_;             // per node, valid inside the current stage loop
  std::vector<int8_t> readsInner_;        // per node: 0 unknown, 1 reads the inner index, -1 not
  std::vector<bool> triedSelect_;         // per node: a select chain emitSelectedLoad has seen
  std::vector<int32_t> tabulated_;        // the nodes kept in tables, by id
  std::vector<llvm::AllocaInst *> table_; // per node: its table, or null
  bool fillingTables_ = false;
  // Per node while a split inner loop is emitted: kUnresolved, kFalse,
  // kTrue, or the id of a node with the same value.
  static constexpr int32_t kUnresolved = -1, kFalse = -2, kTrue = -3;
  std::vector<int32_t> resolved_;
  /// Whether the loop emitMapStage is emitting is one range of a split
  /// inner loop (emitLoop's hints for short ranges).
  bool splitRange_ = false;
};

/// One hook per row of ir/ScalarOps.def, defined in EmitScalar.cpp: the
/// LLVM value of node `n` given its operands' values (`args`, null for
/// leaves) and its first operand's dtype. A row without a hook does not link.
using ScalarHook = Value *(*)(KernelEmitter &e, const ScalarNode &n, Value *const *args,
                              DType argType);
#define SCALAR_OP(E, N, A, C, Cost, Fold, FE, IE)                                                  \
  Value *emitScalar##E(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType argType);
#include "ir/ScalarOps.def"

/// The hook of `op`.
ScalarHook scalarHook(ScalarOp op);

} // namespace kiln::codegen::cpu
