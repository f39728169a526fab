//===- Graph.cpp - SSA graphs: Value, Node, Graph, Module -------*- C++ -*-===//
#include "ir/Graph.h"

#include "ir/Support.h"

#include <algorithm>

namespace kiln {

//===----------------------------------------------------------------------===//
// Value
//===----------------------------------------------------------------------===//

void Value::removeUse(Use u) {
  auto it = std::find(uses_.begin(), uses_.end(), u);
  KILN_ASSERT(it != uses_.end());
  uses_.erase(it);
}

bool Value::isGraphOutput() const {
  const auto &outs = graph_->outputs();
  return std::find(outs.begin(), outs.end(), this) != outs.end();
}

void Value::replaceAllUsesWith(Value *other) {
  if (other == this)
    return;
  while (!uses_.empty()) {
    Use u = uses_.back();
    u.user->setOperand(u.operandIndex, other);
  }
  auto outs = graph_->outputs();
  for (unsigned i = 0; i < outs.size(); ++i)
    if (outs[i] == this)
      graph_->setOutput(i, other);
}

//===----------------------------------------------------------------------===//
// Node
//===----------------------------------------------------------------------===//

void Node::setOperand(unsigned i, Value *v) {
  KILN_ASSERT(i < operands_.size());
  if (operands_[i])
    operands_[i]->removeUse(Use{this, i});
  operands_[i] = v;
  if (v)
    v->addUse(Use{this, i});
}

void Node::setAttr(unsigned i, Attribute a) {
  KILN_ASSERT(i < attrs_.size());
  KILN_ASSERT(attrKind(a) == info_->attrs[i].kind);
  attrs_[i] = std::move(a);
}

void Node::moveBefore(Node *other) {
  KILN_ASSERT(other && other->graph_ == graph_);
  if (other == this)
    return;
  graph_->unlink(this);
  graph_->linkBefore(this, other);
}

void Node::moveAfter(Node *other) {
  KILN_ASSERT(other && other->graph_ == graph_);
  if (other == this)
    return;
  graph_->unlink(this);
  graph_->linkBefore(this, other->next_);
}

bool Node::isUnused() const {
  for (const auto &r : results_)
    if (r->hasUses() || r->isGraphOutput())
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

Graph::~Graph() {
  // Drop every use first, so that deletion order does not matter even when a
  // (not yet verified) graph is out of topological order.
  outputs_.clear();
  for (Node *n : nodes())
    for (unsigned i = 0; i < n->operands_.size(); ++i)
      n->setOperand(i, nullptr);
  while (tail_) {
    Node *n = tail_;
    unlink(n);
    delete n;
  }
}

Value *Graph::addInput(TensorType t, std::string name) {
  auto v = std::unique_ptr<Value>(
      new Value(std::move(t), this, nullptr, static_cast<unsigned>(inputs_.size())));
  v->setName(std::move(name));
  inputs_.push_back(std::move(v));
  return inputs_.back().get();
}

std::vector<Value *> Graph::inputs() const {
  std::vector<Value *> out;
  for (const auto &v : inputs_)
    out.push_back(v.get());
  return out;
}

void Graph::setOutputs(std::vector<Value *> outs) {
  outputs_ = std::move(outs);
}
void Graph::setOutput(unsigned i, Value *v) {
  outputs_[i] = v;
}

std::vector<Node *> Graph::nodeList() const {
  std::vector<Node *> out;
  out.reserve(numNodes_);
  for (Node *n : nodes())
    out.push_back(n);
  return out;
}

Node *Graph::createNode(const OpInfo &info, std::vector<Value *> operands,
                        std::vector<TensorType> resultTypes, std::vector<Attribute> attrs,
                        Location loc, Node *before) {
  Node *n = new Node(info, this);
  n->operands_.resize(operands.size(), nullptr);
  for (unsigned i = 0; i < operands.size(); ++i)
    n->setOperand(i, operands[i]);
  for (unsigned i = 0; i < resultTypes.size(); ++i)
    n->results_.push_back(std::unique_ptr<Value>(new Value(std::move(resultTypes[i]), this, n, i)));
  if (attrs.empty())
    attrs = info.defaults;
  KILN_ASSERT(attrs.size() == info.attrs.size());
  n->attrs_ = std::move(attrs);
  n->loc_ = std::move(loc);
  linkBefore(n, before);
  return n;
}

void Graph::erase(Node *n) {
  KILN_ASSERT(n->graph_ == this);
  KILN_ASSERT(n->isUnused() && "erasing a node whose results are used or graph outputs");
  for (unsigned i = 0; i < n->operands_.size(); ++i)
    n->setOperand(i, nullptr);
  unlink(n);
  delete n;
}

void Graph::unlink(Node *n) {
  (n->prev_ ? n->prev_->next_ : head_) = n->next_;
  (n->next_ ? n->next_->prev_ : tail_) = n->prev_;
  n->prev_ = n->next_ = nullptr;
  --numNodes_;
}

void Graph::linkBefore(Node *n, Node *before) {
  if (!before) {
    n->prev_ = tail_;
    n->next_ = nullptr;
    (tail_ ? tail_->next_ : head_) = n;
    tail_ = n;
  } else {
    n->next_ = before;
    n->prev_ = before->prev_;
    (before->prev_ ? before->prev_->next_ : head_) = n;
    before->prev_ = n;
  }
  ++numNodes_;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>(name_);
  std::unordered_map<const Value *, Value *> map;
  for (const auto &in : inputs_)
    map[in.get()] = g->addInput(in->type(), in->name());
  for (Node *n : nodes()) {
    std::vector<Value *> ops;
    for (Value *v : n->operands())
      ops.push_back(map.at(v));
    std::vector<TensorType> types;
    for (const auto &r : n->results_)
      types.push_back(r->type());
    Node *c = g->createNode(n->info(), ops, types, n->attrs_, n->loc());
    for (unsigned i = 0; i < n->numResults(); ++i) {
      c->result(i)->setName(n->result(i)->name());
      map[n->result(i)] = c->result(i);
    }
  }
  std::vector<Value *> outs;
  for (Value *v : outputs_)
    outs.push_back(map.at(v));
  g->setOutputs(outs);
  return g;
}

Graph *Module::lookup(std::string_view name) const {
  for (const auto &g : graphs_)
    if (g->name() == name)
      return g.get();
  return nullptr;
}

bool structurallyEqual(const Graph &a, const Graph &b, bool compareLocs, std::string *why) {
  auto fail = [&](std::string msg) {
    if (why)
      *why = std::move(msg);
    return false;
  };
  if (a.name() != b.name())
    return fail("graph names differ: @" + a.name() + " vs @" + b.name());
  if (a.numInputs() != b.numInputs())
    return fail("input counts differ");
  std::unordered_map<const Value *, const Value *> map;
  auto sameValue = [&](const Value *x, const Value *y) {
    return x->type() == y->type() && x->name() == y->name();
  };
  for (unsigned i = 0; i < a.numInputs(); ++i) {
    if (!sameValue(a.input(i), b.input(i)))
      return fail("input " + std::to_string(i) + " differs");
    map[a.input(i)] = b.input(i);
  }
  if (a.numNodes() != b.numNodes())
    return fail("node counts differ");
  Node *m = b.front();
  unsigned idx = 0;
  for (Node *n : a.nodes()) {
    std::string where = "node " + std::to_string(idx++) + " ('" + std::string(n->mnemonic()) + "')";
    if (n->kind() != m->kind())
      return fail(where + ": op differs");
    if (n->numOperands() != m->numOperands() || n->numResults() != m->numResults())
      return fail(where + ": arity differs");
    for (unsigned i = 0; i < n->numOperands(); ++i) {
      auto it = map.find(n->operand(i));
      if (it == map.end() || it->second != m->operand(i))
        return fail(where + ": operand " + std::to_string(i) + " differs");
    }
    for (unsigned i = 0; i < n->attrs().size(); ++i)
      if (!attrEqual(n->attr(i), m->attr(i)))
        return fail(where + ": attribute '" + std::string(n->info().attrs[i].name) + "' differs");
    for (unsigned i = 0; i < n->numResults(); ++i) {
      if (!sameValue(n->result(i), m->result(i)))
        return fail(where + ": result " + std::to_string(i) + " differs");
      map[n->result(i)] = m->result(i);
    }
    if (compareLocs && n->loc() != m->loc())
      return fail(where + ": location differs");
    m = m->next();
  }
  if (a.outputs().size() != b.outputs().size())
    return fail("output counts differ");
  for (unsigned i = 0; i < a.outputs().size(); ++i)
    if (map.at(a.outputs()[i]) != b.outputs()[i])
      return fail("output " + std::to_string(i) + " differs");
  return true;
}

} // namespace kiln
