//===- HoistLoopInvariants.cpp - Loop-invariant code motion -----*- C++ -*-===//
//
// Moves the nodes of a `loop` body that compute the same value in every
// iteration out of the loop, so they run once instead of once per
// iteration. A body node is invariant when it reads only the body's
// captured inputs (Note [Regions] in docs/IR.md), constants and other
// invariant nodes; it is hoisted when it is also safe to run where the
// loop might not have (Note [Hoisting safely]). The hoisted nodes are
// inlined before the loop on the loop's operands (inlineRegion, which
// rewrites the body's symbols into the graph's), and each of their values
// the rest of the body still reads enters it as a new captured input.
// Constants are not hoisted on their own (nothing to save), only copied
// along with a hoisted node that reads them. Nested loops: the pass runs on
// regions before the graph that holds them (Note [Passes in regions]), so
// a value hoisted out of an inner loop may then leave the outer one too.
//
// Requires: a verified graph. Establishes: no loop body node that is
// invariant and safe to hoist.
//
//   %y = loop(%n, %t, %acc, %w) {body = graph @b(%i: i64[], %c: bool[],
//                                                %a: f32[4], %v: f32[4]) -> ... {
//       %e = exp(%v) : f32[4]                    // the same in every iteration
//       %s = add(%a, %e) : f32[4]
//       return %c, %s
//     }, num_carried = 1} : f32[4]
//
//   %e = exp(%w) : f32[4]                        // after: computed once
//   %y = loop(%n, %t, %acc, %w, %e) {body = graph @b(..., %v: f32[4], %e1: f32[4]) ... {
//       %s = add(%a, %e1) : f32[4]
//       return %c, %s
//     }, num_carried = 1} : f32[4]
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "hoist-loop-invariants"

#include "ir/Builder.h"
#include "passes/Internal.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

#include <unordered_set>

namespace kiln {
namespace {

// Note [Hoisting safely]
// A hoisted node runs even when the loop runs no iteration, so it must not
// be able to fail where the loop would not have run. On values: the
// reference kernels reject an integer division by zero and an
// out-of-range index (gather, scatter). On shapes: a node over symbolic
// dims may assume two of them equal (an add of [N] and [M]), checked when
// its graph runs, or size a result from a symbol at run time. A node is
// hoisted only when every operand is floating-point or bool (no integer:
// no divisor, no index), its operand and result types are static (a
// compile binds the sizes first), and it has no region and no
// value-dependent shape (an `if`, `loop` or `nonzero`). Shape arithmetic on integers
// is constant-fold's to remove anyway.
bool safeToHoist(const Node &n) {
  if (n.numOperands() == 0 || n.hasTrait(ValueDependentShape))
    return false;
  for (const Attribute &a : n.attrs())
    if (std::holds_alternative<GraphAttr>(a))
      return false;
  for (const Value *v : n.operands())
    if ((!isFloat(v->type().dtype) && v->type().dtype != DType::Bool) || !v->type().isStatic())
      return false;
  for (unsigned r = 0; r < n.numResults(); ++r)
    if (!n.result(r)->type().isStatic())
      return false;
  return true;
}

class HoistLoopInvariantsPass : public Pass {
public:
  HoistLoopInvariantsPass()
      : Pass(kHoistLoopInvariantsSpec.name, kHoistLoopInvariantsSpec.description) {}

  PassResult run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    for (Node *n : g.nodeList()) {
      if (n->kind() != OpKind::Loop)
        continue;
      FailureOr<bool> done = hoist(g, n, ctx.diag());
      if (failed(done))
        return PassResult::failure();
      changed |= *done;
    }
    return PassResult::success(changed);
  }

private:
  FailureOr<bool> hoist(Graph &g, Node *loop, DiagnosticEngine &diag) {
    LoopOp op(*loop);
    const unsigned numCarried = static_cast<unsigned>(op.num_carried());
    // Work on a clone: what stays in the loop, and (hoisted) what leaves.
    std::unique_ptr<Graph> body = op.body()->clone();
    std::unordered_set<const Value *> invariant;
    for (unsigned i = 2 + numCarried; i < body->numInputs(); ++i)
      invariant.insert(body->input(i));
    std::vector<Node *> hoisted;
    for (Node *n : body->nodes()) {
      bool reads = std::all_of(n->operands().begin(), n->operands().end(),
                               [&](const Value *v) { return invariant.count(v) != 0; });
      bool constant = n->kind() == OpKind::Constant;
      if (!reads || (!constant && !safeToHoist(*n)))
        continue;
      for (unsigned r = 0; r < n->numResults(); ++r)
        invariant.insert(n->result(r));
      if (!constant)
        hoisted.push_back(n);
    }
    if (hoisted.empty())
      return false;
    // The hoisted values the rest of the body reads (or returns).
    std::unordered_set<const Node *> moving(hoisted.begin(), hoisted.end());
    std::vector<Value *> exposed;
    for (Node *n : hoisted)
      for (unsigned r = 0; r < n->numResults(); ++r) {
        Value *v = n->result(r);
        bool needed =
            v->isGraphOutput() || std::any_of(v->uses().begin(), v->uses().end(),
                                              [&](const Use &u) { return !moving.count(u.user); });
        if (needed)
          exposed.push_back(v);
      }

    // The hoisted part as a region of its own, on the loop's operands.
    std::unique_ptr<Graph> part = body->clone();
    std::vector<Value *> partOuts;
    {
      std::vector<Node *> bodyNodes = body->nodeList(), partNodes = part->nodeList();
      std::unordered_set<const Node *> keep;
      for (size_t i = 0; i < bodyNodes.size(); ++i)
        if (invariant.count(bodyNodes[i]->numResults() ? bodyNodes[i]->result(0) : nullptr))
          keep.insert(partNodes[i]);
      for (Value *v : exposed) {
        size_t i = static_cast<size_t>(
            std::find(bodyNodes.begin(), bodyNodes.end(), v->definingNode()) - bodyNodes.begin());
        partOuts.push_back(partNodes[i]->result(v->index()));
      }
      part->setOutputs(partOuts);
      for (auto it = partNodes.rbegin(); it != partNodes.rend(); ++it)
        if (!keep.count(*it) || (*it)->isUnused())
          part->erase(*it);
    }
    Builder b(g, diag);
    b.setInsertionPoint(loop);
    b.setLoc(loop->loc());
    auto outer = inlineRegion(b, *part, loop->operands());
    if (failed(outer))
      return failure();

    // The body reads each exposed value from a new captured input.
    for (Value *v : exposed) {
      Value *in = body->addInput(v->type(), v->name());
      v->replaceAllUsesWith(in);
    }
    // The hoisted nodes leave the body, then the constants only they read
    // (erased users first: in reverse order, constants last).
    std::vector<Node *> leaving;
    for (Node *n : body->nodeList())
      if (n->kind() == OpKind::Constant && invariant.count(n->result()))
        leaving.push_back(n);
    leaving.insert(leaving.end(), hoisted.begin(), hoisted.end());
    for (auto it = leaving.rbegin(); it != leaving.rend(); ++it)
      if ((*it)->isUnused())
        body->erase(*it);
    std::vector<Value *> operands = loop->operands();
    operands.insert(operands.end(), outer->begin(), outer->end());
    auto replacement = b.create(
        OpKind::Loop, operands,
        {{"body", GraphAttr(std::move(body))}, {"num_carried", static_cast<int64_t>(numCarried)}},
        loop->numResults());
    if (failed(replacement))
      return failure();
    for (unsigned r = 0; r < loop->numResults(); ++r) {
      Value *from = loop->result(r), *to = (*replacement)->result(r);
      if (refines(from->type(), to->type()))
        to->setType(from->type()); // a `?` the loop's run had refined
      passes::transferName(from, to);
      from->replaceAllUsesWith(to);
    }
    g.erase(loop);
    numHoisted += hoisted.size();
    return true;
  }

  Statistic numHoisted{this, "num-hoisted", "Nodes moved out of loop bodies"};
};

} // namespace

std::unique_ptr<Pass> createHoistLoopInvariantsPass() {
  return std::make_unique<HoistLoopInvariantsPass>();
}

} // namespace kiln
