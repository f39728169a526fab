//===- DCE.cpp - Dead code elimination --------------------------*- C++ -*-===//
//
// Removes nodes none of whose results is used by a node or returned. Every
// op is pure (no side effects), so such a node cannot matter.
//   1. Walk the nodes in reverse order.
//   2. Erase a node when it is unused; its producers come earlier in the
//      walk and see their use counts already lowered, so whole dead chains
//      go in one sweep.
//
// Requires: a verified graph. Establishes: every node has a used result.
//
//   %a = exp(%x) : f32[4]          // before
//   %b = neg(%a) : f32[4]          // (unused)
//   return %x
//
//   return %x                      // after
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "dce"

#include "passes/PassManager.h"
#include "passes/Passes.h"

namespace kiln {
namespace {

class DCEPass : public Pass {
public:
  DCEPass() : Pass(kDCESpec.name, kDCESpec.description) {}

  PassResult run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *n = g.back(); n;) {
      Node *prev = n->prev();
      if (n->isUnused()) {
        g.erase(n);
        ++numErased;
        changed = true;
      }
      n = prev;
    }
    return PassResult::success(changed);
  }

private:
  Statistic numErased{this, "num-erased", "Dead nodes erased"};
};

} // namespace

std::unique_ptr<Pass> createDCEPass() {
  return std::make_unique<DCEPass>();
}

} // namespace kiln
