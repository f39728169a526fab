//===- Extract.cpp - Some nodes of a graph as a graph of their own --------===//

#include "ir/Extract.h"

#include "ir/Builder.h"
#include "ir/Ops.h"

#include <set>

namespace kiln {

std::unique_ptr<Graph> extractNodes(const std::string &name, const std::vector<const Node *> &nodes,
                                    const std::vector<const Value *> &outputs,
                                    std::vector<const Value *> &inputs,
                                    const std::map<const Value *, TensorType> &retype,
                                    bool reinfer) {
  auto sub = std::make_unique<Graph>(name);
  std::set<const Node *> members(nodes.begin(), nodes.end());
  std::map<const Value *, Value *> mapped;
  auto operandOf = [&](const Value *v) -> Value * {
    if (auto it = mapped.find(v); it != mapped.end())
      return it->second;
    const Node *def = v->definingNode();
    Value *nv;
    if (def && def->kind() == OpKind::Constant && !members.count(def)) {
      std::vector<Attribute> attrs(def->attrs().begin(), def->attrs().end());
      nv = sub->createNode(def->info(), {}, {v->type()}, attrs, def->loc())->result();
    } else {
      auto t = retype.find(v);
      nv = sub->addInput(t == retype.end() ? v->type() : t->second, v->name());
      inputs.push_back(v);
    }
    nv->setName(v->name());
    return mapped[v] = nv;
  };
  for (const Node *n : nodes) {
    std::vector<Value *> operands;
    std::vector<TensorType> operandTypes;
    for (const Value *v : n->operands()) {
      operands.push_back(operandOf(v));
      operandTypes.push_back(operands.back()->type());
    }
    std::vector<TensorType> types;
    for (unsigned i = 0; i < n->numResults(); ++i)
      types.push_back(n->result(i)->type());
    std::vector<Attribute> attrs(n->attrs().begin(), n->attrs().end());
    if (reinfer) {
      DiagnosticEngine scratch;
      scratch.pushHandler([](const Diagnostic &) { return true; });
      auto inferred =
          inferTypes(n->info(), operandTypes, attrs, n->numResults(), n->loc(), scratch);
      for (unsigned i = 0; inferred.succeeded() && i < n->numResults(); ++i)
        if (!n->hasTrait(ValueDependentShape) || (*inferred)[i].isStatic())
          types[i] = (*inferred)[i]; // a `?` the run decides stays
    }
    Node *copy = sub->createNode(n->info(), operands, types, attrs, n->loc());
    for (unsigned i = 0; i < n->numResults(); ++i) {
      copy->result(i)->setName(n->result(i)->name());
      mapped[n->result(i)] = copy->result(i);
    }
  }
  std::vector<Value *> outs;
  for (const Value *v : outputs)
    outs.push_back(operandOf(v));
  sub->setOutputs(outs);
  return sub;
}

} // namespace kiln
