//===- CSE.cpp - Common subexpression elimination ---------------*- C++ -*-===//
//
// Merges nodes that compute the same thing. All ops are pure, so two nodes
// with the same op, the same operands, equal attributes (attrEqual: tensors
// compared bitwise, floats by bits) and the same result types are
// interchangeable; the later one is replaced by the earlier one.
//   1. Walk the nodes in order; hash each by (op, operands, attributes).
//   2. Compare against the earlier nodes with that hash; for a Commutative
//      op with two operands the swapped order also matches.
//   3. On a match, redirect the node's results to the earlier node's and
//      erase it; it is defined later, so the earlier node dominates all its
//      users.
// Constants are merged like any node: same tensor bytes, same type and the
// same `name` attribute (differently named weights stay apart). The hash
// only picks candidates; the order of the walk decides which node survives,
// so the result is deterministic.
//
// Requires: a verified graph. Establishes: no two nodes are equivalent in
// the sense above.
//
//   %a = exp(%x) : f32[4]          // before
//   %b = exp(%x) : f32[4]
//   %c = add(%a, %b) : f32[4]
//
//   %a = exp(%x) : f32[4]          // after
//   %c = add(%a, %a) : f32[4]
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "cse"

#include "passes/PassManager.h"
#include "passes/Passes.h"

#include <functional>
#include <unordered_map>

namespace kiln {
namespace {

size_t hashCombine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
}

size_t hashAttr(const Attribute &a) {
  size_t h = a.index();
  if (const Tensor *t = std::get_if<Tensor>(&a)) {
    if (t->isNull())
      return h;
    h = hashCombine(h, static_cast<size_t>(t->dtype()));
    for (int64_t d : t->shape())
      h = hashCombine(h, std::hash<int64_t>()(d));
    // A prefix of the bytes is enough to spread candidates; equality
    // compares everything.
    size_t n = std::min<size_t>(t->byteSize(), 256);
    return hashCombine(h, std::hash<std::string_view>()(
                              std::string_view(static_cast<const char *>(t->rawData()), n)));
  }
  return hashCombine(h, std::hash<std::string>()(attrStr(a)));
}

bool isCommutativePair(const Node &n) {
  return n.hasTrait(Commutative) && n.numOperands() == 2;
}

size_t hashNode(const Node &n) {
  size_t h = static_cast<size_t>(n.kind());
  if (isCommutativePair(n)) {
    // Order-independent, so that add(a, b) and add(b, a) meet.
    h = hashCombine(h, std::hash<const void *>()(n.operand(0)) +
                           std::hash<const void *>()(n.operand(1)));
  } else {
    for (Value *v : n.operands())
      h = hashCombine(h, std::hash<const void *>()(v));
  }
  for (const Attribute &a : n.attrs())
    h = hashCombine(h, hashAttr(a));
  return hashCombine(h, n.numResults());
}

bool equivalent(const Node &a, const Node &b) {
  if (a.kind() != b.kind() || a.numOperands() != b.numOperands() ||
      a.numResults() != b.numResults())
    return false;
  bool sameOperands = a.operands() == b.operands();
  if (!sameOperands && isCommutativePair(a))
    sameOperands = a.operand(0) == b.operand(1) && a.operand(1) == b.operand(0);
  if (!sameOperands)
    return false;
  for (unsigned i = 0; i < a.attrs().size(); ++i)
    if (!attrEqual(a.attr(i), b.attr(i)))
      return false;
  for (unsigned i = 0; i < a.numResults(); ++i)
    if (a.result(i)->type() != b.result(i)->type())
      return false;
  return true;
}

class CSEPass : public Pass {
public:
  CSEPass() : Pass(kCSESpec.name, kCSESpec.description) {}

  PassResult run(Graph &g, PassContext &) override {
    // Only looked up, never iterated: pointer hashes cannot decide order.
    std::unordered_map<size_t, std::vector<Node *>> seen;
    bool changed = false;
    for (Node *n : g.nodeList()) {
      std::vector<Node *> &candidates = seen[hashNode(*n)];
      Node *match = nullptr;
      for (Node *c : candidates)
        if (equivalent(*c, *n)) {
          match = c;
          break;
        }
      if (!match) {
        candidates.push_back(n);
        continue;
      }
      for (unsigned i = 0; i < n->numResults(); ++i)
        n->result(i)->replaceAllUsesWith(match->result(i));
      g.erase(n);
      ++numMerged;
      changed = true;
    }
    return PassResult::success(changed);
  }

private:
  Statistic numMerged{this, "num-merged", "Nodes merged into an equivalent earlier node"};
};

} // namespace

std::unique_ptr<Pass> createCSEPass() {
  return std::make_unique<CSEPass>();
}

} // namespace kiln
