//===- Internal.cpp - Helpers shared by the passes --------------*- C++ -*-===//
#include "passes/Internal.h"

#include <cmath>

#include "ir/Builder.h"

#include <algorithm>

namespace kiln::passes {

const Tensor *constantValue(const Value *v) {
  const Node *def = v->definingNode();
  if (!def || def->kind() != OpKind::Constant)
    return nullptr;
  const Tensor &t = std::get<Tensor>(def->attr(ConstantOp::value_index));
  return t.isNull() ? nullptr : &t;
}

bool isSplatConstant(const Value *v, double x) {
  const Tensor *t = constantValue(v);
  return t && t->numel() > 0 && t->isSplat() && t->getDouble(0) == x;
}

unsigned eraseDeadProducers(const std::vector<Value *> &values,
                            const std::function<void(Node *)> &onErase) {
  unsigned erased = 0;
  // Nodes still to check; each at most once, and never one already erased.
  std::vector<Node *> work;
  auto push = [&](Value *v) {
    Node *def = v->definingNode();
    if (def && std::find(work.begin(), work.end(), def) == work.end())
      work.push_back(def);
  };
  for (auto it = values.rbegin(); it != values.rend(); ++it)
    push(*it);
  while (!work.empty()) {
    Node *n = work.back();
    work.pop_back();
    if (!n->isUnused())
      continue;
    std::vector<Value *> operands = n->operands();
    if (onErase)
      onErase(n);
    n->graph()->erase(n);
    ++erased;
    for (auto it = operands.rbegin(); it != operands.rend(); ++it)
      push(*it);
  }
  return erased;
}

void transferName(Value *from, Value *to) {
  if (from == to || from->name().empty() || !to->name().empty())
    return;
  to->setName(from->name());
  from->setName("");
}

void replaceValue(Value *from, Value *to) {
  transferName(from, to);
  from->replaceAllUsesWith(to);
  eraseDeadProducers({from});
}

double batchNormMultiplier(const Node &bn, int64_t c) {
  const Tensor &scale = *constantValue(bn.operand(1)), &var = *constantValue(bn.operand(4));
  return scale.getDouble(c) / std::sqrt(var.getDouble(c) + BatchNormOp(bn).epsilon());
}

std::string derivedConstantName(const Value *v, const char *suffix) {
  const Node *def = v->definingNode();
  const std::string &base = std::get<std::string>(def->attr(ConstantOp::name_index));
  return base.empty() ? std::string() : base + "." + suffix;
}

FailureOr<unsigned> reinferTypes(Graph &g, DiagnosticEngine &diag) {
  unsigned changed = 0;
  for (Node *n : g.nodes()) {
    auto types = inferNodeTypes(*n, diag);
    if (failed(types))
      return failure();
    for (unsigned i = 0; i < n->numResults(); ++i) {
      const TensorType &have = n->result(i)->type(), &want = (*types)[i];
      if (have == want || (n->hasTrait(ValueDependentShape) && refines(have, want)))
        continue;
      n->result(i)->setType(want);
      ++changed;
    }
  }
  return changed;
}

} // namespace kiln::passes
