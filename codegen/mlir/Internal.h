//===- Internal.h - The MLIR exporter's shared state ------------*- C++ -*-===//
//
// Shared by the exporter's files: MlirExport.cpp (module, function, types,
// sizes, constants, the dispatch and the calls of ops without an upstream
// form), ExportOps.cpp (elementwise, reductions, normalizations, products,
// convolutions, pools), ExportMovement.cpp (data movement) and
// EmitScalar.cpp (a scalar DAG as arith and math ops).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/mlir/MlirExport.h"
#include "ir/ScalarExpr.h"

#include <mlir/Dialect/Arith/IR/Arith.h>
#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/Dialect/Linalg/IR/Linalg.h>
#include <mlir/Dialect/Math/IR/Math.h>
#include <mlir/Dialect/Tensor/IR/Tensor.h>
#include <mlir/IR/Builders.h>
#include <mlir/IR/BuiltinOps.h>
#include <mlir/IR/Diagnostics.h>
#include <mlir/IR/OwningOpRef.h>

#include <map>
#include <set>
#include <unordered_map>

namespace kiln::mlirgen {

/// One graph being written as one function.
class Exporter {
public:
  Exporter(mlir::MLIRContext &ctx, const MlirExportOptions &options, DiagnosticEngine &diag)
      : ctx_(ctx), b(&ctx), options(options), diag(diag) {}

  mlir::MLIRContext &ctx_;
  mlir::OpBuilder b;
  const MlirExportOptions &options;
  DiagnosticEngine &diag;
  mlir::ModuleOp module;
  /// The ops written as calls (MlirExport::calls).
  std::set<std::string> calls;
  /// The constants passed as arguments (MlirExportOptions::
  /// constantsAsArguments), in argument order after the graph's inputs.
  std::vector<Tensor> constantArgs;
  /// The index checks' flags (MlirExportOptions::checkIndices) and their
  /// gathers' locations.
  std::vector<std::pair<mlir::Value, Location>> indexChecks;
  /// The function being written, and whether it is the graph's own (the
  /// one constants become arguments of).
  mlir::func::FuncOp function;
  bool topLevel = false;

  /// MLIR's element type of `t` (signless integers: an unsigned dtype's
  /// ops say their signedness); null, after an error at `loc`, for a dtype
  /// MLIR 16 lacks.
  mlir::Type elementType(DType t, const Location &loc);
  /// The ranked tensor type of `t` (symbolic dims dynamic); null on error.
  mlir::RankedTensorType tensorType(const TensorType &t, const Location &loc);
  /// The MLIR location of a node's.
  mlir::Location loc(const Location &l);

  /// The value of graph value `v` (defined earlier).
  mlir::Value value(const Value *v) const { return values_.at(v); }
  void define(const Value *v, mlir::Value m) { values_[v] = m; }

  /// `d` as an `index` value: a constant, or arithmetic over the symbols'
  /// sizes read from the function's arguments (tensor.dim). Null, after an
  /// error at `loc`, when a symbol is no input dim.
  mlir::Value dimValue(const Dim &d, const Location &loc);
  mlir::Value indexConstant(int64_t v);
  /// The dynamic sizes of `t`, in order (what tensor.empty takes).
  bool dynamicSizes(const TensorType &t, const Location &loc,
                    llvm::SmallVectorImpl<mlir::Value> &out);
  /// A tensor.empty of `t`; null on error.
  mlir::Value empty(const TensorType &t, const Location &loc);
  /// A tensor of `t` filled with `v` (linalg.fill of a tensor.empty).
  mlir::Value filled(const TensorType &t, double v, const Location &loc);
  /// A scalar constant of `t` holding `v` (floats as is, integers
  /// truncated, bool v != 0).
  mlir::Value scalarConstant(DType t, double v);

  /// Writes node `n` as a call of `@kiln.<op>` (no upstream form).
  LogicalResult call(const Node &n);

  /// The symbols' sizes, filled from the arguments at the function's entry.
  std::map<std::string, mlir::Value> symbols;

private:
  mlir::Value dimExprValue(const DimExpr &e, const Location &loc);
  std::unordered_map<const Value *, mlir::Value> values_;
  std::map<std::string, mlir::func::FuncOp> callees_;
};

/// Loads the dialects the export writes.
void loadDialects(mlir::MLIRContext &ctx);
/// The module of graph `g` in `ctx`, checked by MLIR's verifier; `calls`
/// gets the ops written as calls. Null after an error.
mlir::OwningOpRef<mlir::ModuleOp> buildModule(mlir::MLIRContext &ctx, const Graph &g,
                                              const MlirExportOptions &options,
                                              DiagnosticEngine &diag,
                                              std::vector<std::string> &calls,
                                              std::vector<Tensor> *constantArgs = nullptr,
                                              std::vector<Location> *indexChecks = nullptr);

/// Reports MLIR's diagnostics as Kiln's (`file:line:col` where MLIR gives
/// one, else `fallback`) while alive.
class DiagnosticBridge {
public:
  DiagnosticBridge(mlir::MLIRContext &ctx, DiagnosticEngine &diag, Location fallback);

private:
  mlir::ScopedDiagnosticHandler handler_;
};

/// The exporters of the op families; each defines n's results.
LogicalResult exportElementwise(Exporter &x, const Node &n);
LogicalResult exportReduction(Exporter &x, const Node &n);
LogicalResult exportNormalization(Exporter &x, const Node &n);
LogicalResult exportMatMul(Exporter &x, const Node &n);
LogicalResult exportGemm(Exporter &x, const Node &n);
LogicalResult exportConv(Exporter &x, const Node &n);
LogicalResult exportPool(Exporter &x, const Node &n);
/// The data movement ops it has a form for; false in `handled` otherwise.
LogicalResult exportMovement(Exporter &x, const Node &n, bool &handled);

/// The indexing map reading an operand of `operand`'s shape at the points
/// of a result of rank `rank` under numpy broadcasting (trailing dims
/// aligned; a static 1 against another size reads index 0).
mlir::AffineMap broadcastMap(mlir::MLIRContext *ctx, const Shape &operand, const Shape &result);

/// Helpers of the op exporters (ExportOps.cpp).
using BodyFn = std::function<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;
/// tensor.empty of n's result `i`, a `?` dim read from an operand of the
/// same (aligned) position that has it.
mlir::Value resultInit(Exporter &x, const Node &n, unsigned i = 0);
/// One linalg.generic with one result; `body` gets the block arguments
/// (inputs, then the output) and returns what it yields.
mlir::Value generic(Exporter &x, mlir::Location at, llvm::ArrayRef<mlir::Value> inputs,
                    llvm::ArrayRef<mlir::AffineMap> maps, mlir::Value init,
                    llvm::ArrayRef<mlir::utils::IteratorType> iterators, const BodyFn &body);
/// A pointwise map of `inputs` (read through `maps`) into a new tensor of `t`.
mlir::Value pointwise(Exporter &x, const Node &n, const TensorType &t,
                      llvm::ArrayRef<mlir::Value> inputs, llvm::ArrayRef<mlir::AffineMap> maps,
                      const BodyFn &body);
mlir::AffineMap identity(Exporter &x, int64_t rank);
/// `v` reshaped to `t` (tensor.reshape by a shape tensor of its sizes).
mlir::Value reshapeTo(Exporter &x, mlir::Value v, const TensorType &t, const Location &l);
/// The scalar op `op` on two register values of dtype `t`.
mlir::Value binaryScalar(mlir::OpBuilder &b, mlir::Location l, ScalarOp op, DType t,
                         mlir::Value lhs, mlir::Value rhs, DiagnosticEngine &diag,
                         const Location &kl);
/// The product of the dims of `s` marked in `which`, as an index value.
mlir::Value product(Exporter &x, const Shape &s, const std::vector<bool> &which, const Location &l);
/// `v` padded to `type` with `low` / `high` elements of `value` per dim.
mlir::Value padTensor(Exporter &x, mlir::Location at, mlir::RankedTensorType type, mlir::Value v,
                      llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high, mlir::Value value);
/// The dtype sums and products of `t` accumulate in (f32 for halves).
DType accumulatorOf(DType t);
/// `input` (of `inType`) reduced over the dims marked in `reduced` with
/// `op` from `start`, as a tensor of the kept dims in dtype `acc`; `pre`
/// maps each element (register form, in `acc`) before it is combined.
mlir::Value
reduce(Exporter &x, const Node &n, mlir::Value input, const TensorType &inType,
       const std::vector<bool> &reduced, ScalarOp op, double start, DType acc,
       const std::function<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::Value)> &pre = {});
/// `v`, a tensor of n's result shape in dtype `acc` (an accumulator),
/// rounded to n's result dtype (itself when they are one).
mlir::Value narrowed(Exporter &x, const Node &n, mlir::Value v, DType acc);
/// An index value as a register value of float dtype `t`.
mlir::Value countAsFloat(mlir::OpBuilder &b, mlir::Location l, mlir::Value count, DType t);

/// Register values of a scalar body: the MLIR value of each DAG node.
/// Halves (f16, bf16) are computed in f32 and rounded after every node, as
/// ir/ScalarExpr.h defines them; `leaf` gives the value of each Load (its
/// slot is the operand number) in that register type.
FailureOr<mlir::Value> emitScalarDag(mlir::OpBuilder &b, mlir::Location loc, const ScalarDag &dag,
                                     ScalarRef root,
                                     const std::function<mlir::Value(const ScalarNode &)> &leaf,
                                     const Location &kilnLoc, DiagnosticEngine &diag);
/// The register type of dtype `t` in a scalar body (f32 for halves).
mlir::Type registerType(mlir::MLIRContext *ctx, DType t);
/// `v` (a value of `t`'s element type) in its register type, and back.
mlir::Value toRegister(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, DType t);
mlir::Value fromRegister(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, DType t);
/// `v` of dtype `from` cast to `to` with Kiln's semantics (Note [Scalar
/// casts] in ir/ScalarExpr.h), both in register types.
mlir::Value castScalar(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, DType from, DType to);

} // namespace kiln::mlirgen
