//===- MlirExport.h - Kiln graphs as MLIR 16 modules ------------*- C++ -*-===//
//
// `kiln translate MODEL --emit=mlir` writes a graph as an MLIR 16 module in
// upstream dialects only: one `func.func` whose arguments and results are
// the graph's inputs and outputs as ranked tensors (a symbolic dim is a
// dynamic dim, `?`), and per node the ops of `tensor`, `arith`, `math` and
// `linalg` that compute it (Note [MLIR export] in MlirExport.cpp):
//
//   elementwise ops     one linalg.generic, broadcasts as indexing maps, the
//                       body from the op's scalar semantics (ir/ScalarExpr.h)
//   matmul, gemm        linalg.matmul / linalg.batch_matmul, else a
//                       linalg.generic contraction
//   conv, pools         linalg.conv_*, linalg.depthwise_conv_*,
//                       linalg.pooling_* after a tensor.pad
//   reductions, norms   linalg.generic with reduction iterators
//   data movement       tensor.reshape, linalg.transpose, tensor.extract_slice,
//                       tensor.insert_slice, tensor.pad, linalg.generic gathers
//   constants           arith.constant: dense<...> inline when small, else a
//                       dense_resource blob in the module's resource section
//
// An op MLIR's upstream dialects have no form for (recurrent layers, if,
// loop, top_k, argmax, resize, scatters, gather_nd, gather_elements,
// nonzero, conv_transpose, 3-D convolutions, ...) is a `func.call` of a
// private declaration named `@kiln.<op>` with the node's attributes in
// `kiln.attrs`; `kiln translate` names them on stderr.
//
// The module is checked by MLIR's verifier before it is printed.
// This header includes no MLIR: the library is built where libMLIR.so is
// (KILN_MLIR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/Support.h"
#include "ir/Tensor.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::mlirgen {

struct MlirExportOptions {
  /// Constants with at most this many elements are printed inline
  /// (`dense<...>`); larger ones are `dense_resource` blobs.
  int64_t inlineElements = 16;
  /// Print each op's location (`loc(...)`: the node's ONNX name or file:line).
  bool printLocs = false;
  /// Constants larger than `inlineElements` become trailing arguments of
  /// the graph's function (read-only: `bufferization.writable = false`)
  /// instead of blobs: the MLIR CPU path passes their bytes (MlirRun.cpp).
  bool constantsAsArguments = false;
  /// Gathers read a clamped index, and the graph's function returns, after
  /// its outputs, one i1 per gather set when an index is outside its axis
  /// (the MLIR CPU path reports it; the export for other tools leaves an
  /// index unchecked, as ONNX does).
  bool checkIndices = false;
};

struct MlirExport {
  /// The module's text.
  std::string text;
  /// The ops written as `func.call @kiln.<op>` (no upstream form), sorted,
  /// each once.
  std::vector<std::string> calls;
};

/// `g` as an MLIR module. Fails, with a diagnostic at the node, for a dtype
/// MLIR 16 has no type for (the FNUZ floats, f4e2m1fn) and for a symbolic
/// size that no input dim gives.
FailureOr<MlirExport> exportMlir(const Graph &g, const MlirExportOptions &options,
                                 DiagnosticEngine &diag);

/// Parses `text` with MLIR 16's parser and runs its verifier in process;
/// each MLIR diagnostic becomes one error at `bufferName:line:col`.
LogicalResult verifyMlir(std::string_view text, const std::string &bufferName,
                         DiagnosticEngine &diag);

/// A graph compiled through MLIR's own lowering to loops and LLVM IR and
/// JIT-compiled by MLIR's ExecutionEngine: the second CPU path, a
/// cross-check of Kiln's (Note [The MLIR CPU path] in MlirRun.cpp).
class MlirProgram {
public:
  /// Fails for a graph with an op MLIR has no form for (naming them), and
  /// where the export or the lowering fails.
  static FailureOr<std::unique_ptr<MlirProgram>> compile(const Graph &g, DiagnosticEngine &diag);
  /// Runs on `inputs` (the graph's dtypes and static dims; a symbol's size
  /// is the same wherever it appears).
  FailureOr<std::vector<Tensor>> run(std::span<const Tensor> inputs, DiagnosticEngine &diag) const;
  ~MlirProgram();

private:
  MlirProgram();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln::mlirgen
