//===- Interpreter.h - The reference interpreter ----------------*- C++ -*-===//
//
// Runs a verified graph on host tensors with each op's reference kernel. It
// is the oracle for everything else (constant folding, the tracer, the
// differential tests of compiled kernels), so it favours obvious correctness
// over speed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <map>
#include <set>
#include <string>

#include "ir/Graph.h"

#include <span>
#include <vector>

namespace kiln {

/// A dim equality that a node's type inference assumed (DimEquality in
/// ir/Ops.h): `n == m` of add(f32[n,4], f32[m,4]).
struct DimAssumption {
  DimEquality dims;
  const Node *node;
  /// `n == m`.
  std::string str() const;
};
/// Every equality the graph's nodes assume, re-inferred from the current
/// operand types: each pair once, with the first node that assumes it.
std::vector<DimAssumption> dimAssumptions(const Graph &g);

/// Checks `inputs` against the graph's inputs: count, dtype and shape; a
/// symbolic dim binds to the first size seen and must agree everywhere,
/// and the bound sizes must keep every assumption of `assumed` (one error
/// per broken one, at its node, naming the inputs that bound each side).
/// Returns the symbols' values.
FailureOr<std::map<std::string, int64_t>> bindInputs(const Graph &g, std::span<const Tensor> inputs,
                                                     DiagnosticEngine &diag,
                                                     std::span<const DimAssumption> assumed);
/// The same with the graph's own dimAssumptions.
FailureOr<std::map<std::string, int64_t>> bindInputs(const Graph &g, std::span<const Tensor> inputs,
                                                     DiagnosticEngine &diag);
LogicalResult checkInputs(const Graph &g, std::span<const Tensor> inputs, DiagnosticEngine &diag);
/// The symbols the graph's input dims name (`N` of f32[N,2*S+1] and S).
std::set<std::string> inputSymbols(const Graph &g);

/// Runs one node's reference kernel on concrete operands (its result types
/// are inferred from the operands' concrete types).
FailureOr<std::vector<Tensor>> evaluateNode(const Node &n, std::span<const Tensor> operands,
                                            DiagnosticEngine &diag);
/// The same with `attrs` in place of the node's (its symbolic attributes
/// bound, Note [Symbolic attributes] in docs/IR.md).
FailureOr<std::vector<Tensor>> evaluateNode(const Node &n, std::span<const Attribute> attrs,
                                            std::span<const Tensor> operands,
                                            DiagnosticEngine &diag);

/// Runs one op's reference kernel on concrete operands, outside any graph
/// (the eager API): inference on the operands' types, the kernel, and the
/// check that its results have those types (Note [Value-dependent shapes]
/// in docs/IR.md for the ops whose results the kernel sizes).
FailureOr<std::vector<Tensor>> evaluateOp(const OpInfo &info, std::span<const Attribute> attrs,
                                          std::span<const Tensor> operands, unsigned numResults,
                                          const Location &loc, DiagnosticEngine &diag);

/// Runs the graph; returns its outputs. Intermediates are freed after their
/// last use.
FailureOr<std::vector<Tensor>> interpret(const Graph &g, std::span<const Tensor> inputs,
                                         DiagnosticEngine &diag);

} // namespace kiln
