//===- ConstantFold.cpp - Evaluate nodes with constant operands -*- C++ -*-===//
//
// Replaces computations whose values are known at compile time by
// constants:
//   1. Walk the nodes in order (so a folded result feeds later folds).
//   2. `shape` of a value whose shape is static becomes an i64 constant,
//      whatever its operand is.
//   3. A non-constant node whose operands are all constants (including ops
//      with no operands, like range) is evaluated with its reference kernel
//      (evaluateNode); each result becomes a constant node, multi-result
//      nodes included.
//   4. The folded node, and operand constants left without users, are
//      erased.
// Skipped, and left for run time: results with more than kMaxFoldElements
// elements (see Note [Fold size limit]), results whose recorded type is not
// static (except a value-dependent op's, e.g. nonzero of a constant: the run
// sizes its `?` dims, and the nodes after it are re-inferred), and nodes
// whose kernel fails on these inputs (no diagnostic: the failure belongs to
// whoever runs the graph).
//
// Requires: a verified graph. Establishes: no node small enough to fold has
// only constant operands.
//
//   %a = constant dense<[1.0, 2.0]> : f32[2]     // before
//   %b = neg(%a) : f32[2]
//   %c = add(%x, %b) : f32[2]
//   %s = shape(%x) : i64[1]
//
//   %b = constant dense<[-1.0, -2.0]> : f32[2]   // after
//   %c = add(%x, %b) : f32[2]
//   %s = constant dense<2> : i64[1]
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "constant-fold"

#include "ir/Interpreter.h"
#include "passes/Internal.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

namespace kiln {
namespace {

// Note [Fold size limit]
// A folded result is stored in the graph as a new constant. Folding
// transpose(weight) or expand(scalar, [4096, 4096]) would add a copy of a
// large tensor to the model (the weight may have other users, and an expand
// is cheap at run time but huge as data), so results of more than 2^20
// elements (4 MiB of f32) are left to run time. Small shape arithmetic,
// the main thing folding is for, is far below the limit.
constexpr int64_t kMaxFoldElements = int64_t(1) << 20;

class ConstantFoldPass : public Pass {
public:
  ConstantFoldPass() : Pass(kConstantFoldSpec.name, kConstantFoldSpec.description) {}

  PassResult run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodeList()) {
      // Earlier folds may have erased this node as a dead operand constant;
      // those are constants, and constants are never folded, so a snapshot
      // entry is only dereferenced while its node is alive.
      if (erased_.count(n) || n->kind() == OpKind::Constant)
        continue;
      std::vector<Tensor> results;
      if (!evaluate(*n, results))
        continue;
      replaceWithConstants(g, n, results);
      ++numFolded;
      changed = true;
    }
    erased_.clear();
    // A folded `?` dim is a size now: the nodes after it learn it.
    if (std::exchange(refined_, false) && failed(passes::reinferTypes(g, ctx.diag())))
      return PassResult::failure();
    return PassResult::success(changed);
  }

private:
  /// Computes the results of `n` when they are known and small enough.
  bool evaluate(const Node &n, std::vector<Tensor> &results) {
    // A value-dependent op without regions (nonzero) folds to the size its
    // run gives; an `if` or `loop` is left to inline-regions.
    const bool valueDependent = n.hasTrait(ValueDependentShape) && !hasRegion(n);
    for (unsigned i = 0; i < n.numResults(); ++i) {
      const TensorType &t = n.result(i)->type();
      if (!t.isStatic() && !valueDependent)
        return false;
      if (!t.isStatic())
        continue; // sized by the run, checked below
      if (numElements(staticSizes(t.shape)) > kMaxFoldElements) {
        if (n.kind() == OpKind::ShapeOf || allOperandsConstant(n))
          ++numTooLarge;
        return false;
      }
    }
    if (n.kind() == OpKind::ShapeOf)
      return evaluateShape(n, results);
    // A loop is not run at compile time: its trip count is the model's to
    // bound (inline-regions unrolls the short ones, which then fold).
    if (n.kind() == OpKind::Loop || !allOperandsConstant(n))
      return false;
    // A value-dependent result's size is known only after the run: bound it
    // before running by its operands' elements times their rank (nonzero's
    // largest result).
    if (valueDependent) {
      int64_t bound = 0;
      for (const Value *v : n.operands())
        bound += numElements(staticSizes(v->type().shape)) * std::max<int64_t>(1, v->type().rank());
      if (bound > kMaxFoldElements) {
        ++numTooLarge;
        return false;
      }
    }
    std::vector<Tensor> operands;
    for (Value *v : n.operands())
      operands.push_back(*passes::constantValue(v));
    passes::QuietDiagnostics quiet;
    auto folded = evaluateNode(n, operands, quiet);
    if (failed(folded)) {
      ++numFailed;
      return false;
    }
    for (unsigned i = 0; i < n.numResults(); ++i) {
      const TensorType got = (*folded)[i].type(), &want = n.result(i)->type();
      if (valueDependent
              ? !refines(got, want) || numElements(staticSizes(got.shape)) > kMaxFoldElements
              : got != want)
        return false;
    }
    refined_ |= valueDependent;
    results = folded.take();
    return true;
  }

  static bool hasRegion(const Node &n) {
    return std::any_of(n.attrs().begin(), n.attrs().end(),
                       [](const Attribute &a) { return std::holds_alternative<GraphAttr>(a); });
  }

  static bool allOperandsConstant(const Node &n) {
    return std::all_of(n.operands().begin(), n.operands().end(),
                       [](Value *v) { return passes::constantValue(v) != nullptr; });
  }

  /// `shape(x) {start, end}`: the dims start..end of x (negative bounds
  /// count from the end, both clamped to [0, rank]), when they are static.
  static bool evaluateShape(const Node &n, std::vector<Tensor> &results) {
    const Shape &shape = n.operand(0)->type().shape;
    int64_t rank = static_cast<int64_t>(shape.size());
    auto clampBound = [rank](int64_t b) {
      if (b < 0)
        b += rank;
      return std::clamp<int64_t>(b, 0, rank);
    };
    ShapeOfOp op(n);
    int64_t start = clampBound(op.start()), end = clampBound(op.end());
    std::vector<int64_t> dims;
    for (int64_t i = start; i < end; ++i) {
      const Dim &d = shape[static_cast<size_t>(i)];
      if (!d.isStatic())
        return false;
      dims.push_back(d.size());
    }
    Tensor t = Tensor::fromInts(DType::I64, {static_cast<int64_t>(dims.size())}, dims);
    if (t.type() != n.result(0)->type())
      return false; // the op's inference disagrees with this reading: leave it
    results.push_back(std::move(t));
    return true;
  }

  void replaceWithConstants(Graph &g, Node *n, std::vector<Tensor> &results) {
    const OpInfo &info = opInfo(OpKind::Constant);
    for (unsigned i = 0; i < n->numResults(); ++i) {
      // The node is built directly (not through Builder::constant): its type
      // is the tensor's, the folded value's recorded type or (a
      // value-dependent result) a refinement of it.
      TensorType type = results[i].type();
      std::vector<Attribute> attrs = info.defaults;
      attrs[ConstantOp::value_index] = std::move(results[i]);
      Node *c = g.createNode(info, {}, {std::move(type)}, std::move(attrs), n->loc(), n);
      passes::transferName(n->result(i), c->result(0));
      n->result(i)->replaceAllUsesWith(c->result(0));
    }
    std::vector<Value *> operands = n->operands();
    erased_.insert(n);
    g.erase(n);
    passes::eraseDeadProducers(operands, [this](Node *dead) { erased_.insert(dead); });
  }

  /// Nodes erased during the current run (the walk's snapshot still holds
  /// them).
  std::unordered_set<const Node *> erased_;
  /// Whether a value-dependent result was folded to a refined type.
  bool refined_ = false;

  Statistic numFolded{this, "num-folded", "Nodes folded to constants"};
  Statistic numTooLarge{this, "num-too-large", "Foldable nodes skipped for the size limit"};
  Statistic numFailed{this, "num-failed", "Nodes whose reference kernel failed (left in place)"};
};

} // namespace

std::unique_ptr<Pass> createConstantFoldPass() {
  return std::make_unique<ConstantFoldPass>();
}

} // namespace kiln
