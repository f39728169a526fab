//===- InferShapes.cpp - Propagate result types -----------------*- C++ -*-===//
//
// Recomputes every result type from the operand types, so that a change
// upstream (a graph input refined from `f32[?,8]` to `f32[4,8]`, a node
// rewritten by hand or by a frontend) reaches every value.
//   1. Walk the nodes in order: operands are final when a node is reached.
//   2. Run the op's inference (inferNodeTypes) on the current operand types.
//   3. Store each inferred result type that differs from the recorded one.
// If inference rejects a node (the new operand types are incompatible), its
// located error is reported and the pass fails; nodes before it keep their
// new types.
//
// Requires: a structurally valid graph (SSA, arity, attribute kinds); result
// types may be stale. Establishes: every recorded result type is the
// inferred one (rule [V5] of the verifier).
//
//   graph @g(%x: f32[4,8]) -> (f32[?,8]) {        // before
//     %r = relu(%x) : f32[?,8]
//
//   graph @g(%x: f32[4,8]) -> (f32[4,8]) {        // after
//     %r = relu(%x) : f32[4,8]
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "infer-shapes"

#include "ir/Builder.h"
#include "passes/Internal.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

namespace kiln {
namespace {

class InferShapesPass : public Pass {
public:
  InferShapesPass() : Pass(kInferShapesSpec.name, kInferShapesSpec.description) {}

  PassResult run(Graph &g, PassContext &ctx) override {
    auto changed = passes::reinferTypes(g, ctx.diag());
    if (failed(changed))
      return PassResult::failure();
    numUpdated += *changed;
    return PassResult::success(*changed > 0);
  }

private:
  Statistic numUpdated{this, "num-updated", "Result types changed"};
};

} // namespace

std::unique_ptr<Pass> createInferShapesPass() {
  return std::make_unique<InferShapesPass>();
}

} // namespace kiln
