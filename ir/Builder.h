//===- Builder.h - Creating nodes with inferred types -----------*- C++ -*-===//
//
// The Builder is how frontends and passes create nodes: it fills attribute
// defaults, checks attribute names and kinds against the op table, and runs
// the op's type inference, so every node it creates is typed. Errors are
// reported at the builder's current location.
//
//   Builder b(graph, diag);
//   b.setLoc(Location::name("Conv_3"));
//   FailureOr<Node *> n = b.create(OpKind::Transpose, {x}, {{"perm", Ints{1, 0}}});
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include <string>
#include <utility>
#include <vector>

namespace kiln {

using Ints = std::vector<int64_t>;
using Floats = std::vector<double>;
using NamedAttr = std::pair<std::string, Attribute>;

/// Runs `n`'s type inference on its operands' current types; the dims it
/// assumes equal are appended to `assumed` when given.
FailureOr<std::vector<TensorType>> inferNodeTypes(const Node &n, DiagnosticEngine &diag,
                                                  std::vector<DimEquality> *assumed = nullptr);

/// Runs `info`'s type inference on the given operand types and attributes.
FailureOr<std::vector<TensorType>> inferTypes(const OpInfo &info,
                                              std::span<const TensorType> operandTypes,
                                              std::span<const Attribute> attrs, unsigned numResults,
                                              const Location &loc, DiagnosticEngine &diag,
                                              std::vector<DimEquality> *assumed = nullptr);

/// Builds the full attribute list of `info` from named attributes: defaults
/// filled in, unknown names, wrong kinds and missing required ones reported.
FailureOr<std::vector<Attribute>> buildAttrs(const OpInfo &info, std::vector<NamedAttr> named,
                                             const Location &loc, DiagnosticEngine &diag);

class Builder {
public:
  Builder(Graph &g, DiagnosticEngine &diag) : graph_(g), diag_(diag) {}

  Graph &graph() const { return graph_; }
  DiagnosticEngine &diag() const { return diag_; }
  /// New nodes go before `n` (nullptr: at the end of the graph).
  void setInsertionPoint(Node *n) { before_ = n; }
  void setInsertionPointToEnd() { before_ = nullptr; }
  void setLoc(Location loc) { loc_ = std::move(loc); }
  const Location &loc() const { return loc_; }

  /// Creates a typed node; failure (with a diagnostic) on bad operands or
  /// attributes. `numResults` matters only for ops with variadic results.
  FailureOr<Node *> create(OpKind kind, std::vector<Value *> operands,
                           std::vector<NamedAttr> attrs = {}, unsigned numResults = 1);
  /// Same, returning the single result or nullptr on failure.
  Value *createValue(OpKind kind, std::vector<Value *> operands, std::vector<NamedAttr> attrs = {});
  /// A constant node holding `value` (optionally named, e.g. a weight).
  Value *constant(Tensor value, std::string name = "");

private:
  Graph &graph_;
  DiagnosticEngine &diag_;
  Node *before_ = nullptr;
  Location loc_;
};

} // namespace kiln
