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

#include <map>
#include <span>

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

/// Replaces each type in `types` that has a `?` dim by the inferred one
/// when that refines it (Note [Unknown dims in recorded types]).
void fillUnknownDims(const OpInfo &info, const std::vector<Value *> &operands,
                     std::span<const Attribute> attrs, std::vector<TensorType> &types,
                     const Location &loc);

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
  /// Where new nodes go: before this node (nullptr: at the end).
  Node *insertionPoint() const { return before_; }
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

/// The region's input symbols in terms of the dims of `argTypes` (one per
/// region input): the `B` of a region input f32[B,4] given f32[N,4] is `N`.
/// A symbol bound twice keeps the first (whoever runs the region checks
/// that the sizes agree). Note [Regions] in docs/IR.md.
std::map<std::string, DimExpr> bindRegionSymbols(const Graph &region,
                                                 std::span<const TensorType> argTypes);

/// `t` (a region's type) in the enclosing scope: symbols bound by
/// `binding` (bindRegionSymbols) replaced, any other symbolic dim `?` (a
/// region's own symbols mean nothing outside it).
TensorType outsideType(const TensorType &t, const std::map<std::string, DimExpr> &binding);

/// Inlines `region` at the builder's insertion point: each of its nodes is
/// created anew over `args` (region input i is args[i]), its types
/// inferred from the operands' (so a `?` of the region may become known)
/// and its symbolic attributes rewritten by bindRegionSymbols. Returns the
/// values of the region's outputs; failure (with the builder's
/// diagnostics) when a node does not accept its new operands.
FailureOr<std::vector<Value *>> inlineRegion(Builder &b, const Graph &region,
                                             std::span<Value *const> args);

} // namespace kiln
