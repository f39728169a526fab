//===- PatternRewriter.cpp - Local rewrites and the greedy driver -*- C++ -*-===//
#include "passes/PatternRewriter.h"

#include "passes/Internal.h"

namespace kiln {

Value *PatternRewriter::createIfType(Node *before, OpKind kind, std::vector<Value *> operands,
                                     std::vector<NamedAttr> attrs, const TensorType &expected) {
  const OpInfo &info = opInfo(kind);
  passes::QuietDiagnostics quiet;
  auto built = buildAttrs(info, std::move(attrs), before->loc(), quiet);
  if (failed(built))
    return nullptr;
  std::vector<TensorType> operandTypes;
  for (Value *v : operands)
    operandTypes.push_back(v->type());
  auto types = inferTypes(info, operandTypes, *built, 1, before->loc(), quiet);
  if (failed(types) || types->size() != 1 || (*types)[0] != expected)
    return nullptr;
  Node *n = graph_.createNode(info, std::move(operands), types.take(), built.take(), before->loc(),
                              before);
  created_.insert(n);
  push(n);
  return n->result(0);
}

void PatternRewriter::replaceNode(Node *n, Value *v) {
  KILN_ASSERT(n->numResults() == 1 && "replaceNode takes single-result nodes");
  Value *old = n->result(0);
  KILN_ASSERT(v->type() == old->type() && "a replacement must keep the type");
  if (v->definingNode() && created_.count(v->definingNode()))
    passes::transferName(old, v);
  old->replaceAllUsesWith(v);
  for (const Use &u : v->uses())
    push(u.user);
  std::vector<Value *> operands = n->operands();
  for (Value *op : operands)
    if (Node *def = op->definingNode())
      push(def);
  queued_.erase(n);
  graph_.erase(n);
  ++numErased_;
  numErased_ += passes::eraseDeadProducers(operands, [this](Node *dead) { queued_.erase(dead); });
}

void PatternRewriter::push(Node *n) {
  if (queued_.insert(n).second)
    worklist_.push_back(n);
}

Node *PatternRewriter::pop() {
  while (!worklist_.empty()) {
    Node *n = worklist_.front();
    worklist_.pop_front();
    if (queued_.erase(n))
      return n;
  }
  return nullptr;
}

bool applyPatternsGreedily(Graph &g, std::span<const RewritePattern> patterns,
                           unsigned &numRewrites, unsigned &numErased, unsigned maxRewrites) {
  PatternRewriter rewriter(g);
  for (Node *n : g.nodes())
    rewriter.push(n);
  numRewrites = 0;
  while (Node *n = rewriter.pop()) {
    for (const RewritePattern &p : patterns) {
      if (!p.matchAndRewrite(n, rewriter))
        continue;
      if (++numRewrites > maxRewrites) {
        numErased = rewriter.numErased();
        return false;
      }
      break;
    }
  }
  numErased = rewriter.numErased();
  return true;
}

} // namespace kiln
