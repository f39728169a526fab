//===- Graph.h - SSA graphs: Value, Node, Graph, Module ---------*- C++ -*-===//
//
// A Graph has typed input Values, an ordered list of Nodes kept in
// topological order, and output Values. Every Value is defined once (by a
// graph input or a node result) and knows its uses. Nodes own their result
// Values; the Graph owns its Nodes and inputs. A Module owns Graphs.
//
// The mutation API is small: Value::replaceAllUsesWith, Graph::erase,
// Node::moveBefore/moveAfter, Node::setOperand, Graph::clone. Builder (in
// Builder.h) creates nodes with inferred result types.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Attribute.h"
#include "ir/Location.h"
#include "ir/Ops.h"
#include "ir/Type.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

class Graph;
class Node;

/// One use of a Value: operand `operandIndex` of `user`.
struct Use {
  Node *user;
  unsigned operandIndex;
  bool operator==(const Use &o) const = default;
};

class Value {
public:
  const TensorType &type() const { return type_; }
  void setType(TensorType t) { type_ = std::move(t); }
  /// The name hint from text or a frontend (without `%`); may be empty.
  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  /// The node defining this value, or nullptr for a graph input.
  Node *definingNode() const { return def_; }
  bool isGraphInput() const { return def_ == nullptr; }
  /// Result index in the defining node, or input index in the graph.
  unsigned index() const { return index_; }
  Graph *graph() const { return graph_; }

  const std::vector<Use> &uses() const { return uses_; }
  bool hasUses() const { return !uses_.empty(); }
  bool hasOneUse() const { return uses_.size() == 1; }
  /// True when the value is one of its graph's outputs.
  bool isGraphOutput() const;

  /// Given:  %a = f(...); %b = g(%a); return %a
  /// Call:   a->replaceAllUsesWith(c)
  /// Result: %b = g(%c); return %c   (%a has no uses left)
  void replaceAllUsesWith(Value *other);

private:
  friend class Node;
  friend class Graph;
  Value(TensorType t, Graph *g, Node *def, unsigned index)
      : type_(std::move(t)), def_(def), index_(index), graph_(g) {}
  void addUse(Use u) { uses_.push_back(u); }
  void removeUse(Use u);

  TensorType type_;
  std::string name_;
  Node *def_;
  unsigned index_;
  Graph *graph_;
  std::vector<Use> uses_;
};

class Node {
public:
  OpKind kind() const { return info_->kind; }
  const OpInfo &info() const { return *info_; }
  std::string_view mnemonic() const { return info_->mnemonic; }
  bool hasTrait(uint32_t t) const { return info_->hasTrait(t); }
  Graph *graph() const { return graph_; }

  unsigned numOperands() const { return static_cast<unsigned>(operands_.size()); }
  Value *operand(unsigned i) const { return operands_[i]; }
  const std::vector<Value *> &operands() const { return operands_; }
  /// Given:  %b = g(%a)
  /// Call:   b_node->setOperand(0, c)
  /// Result: %b = g(%c)   (use lists updated)
  void setOperand(unsigned i, Value *v);

  unsigned numResults() const { return static_cast<unsigned>(results_.size()); }
  Value *result(unsigned i = 0) const { return results_[i].get(); }

  /// All attributes in schema order, defaults filled in.
  std::span<const Attribute> attrs() const { return attrs_; }
  const Attribute &attr(unsigned i) const { return attrs_[i]; }
  /// Sets attribute `i`; its kind must match the schema.
  void setAttr(unsigned i, Attribute a);

  const Location &loc() const { return loc_; }
  void setLoc(Location l) { loc_ = std::move(l); }

  Node *prev() const { return prev_; }
  Node *next() const { return next_; }
  /// Moves this node right before / after `other` in the same graph. The
  /// caller keeps the order topological.
  void moveBefore(Node *other);
  void moveAfter(Node *other);
  /// True when no result has a use (graph outputs count as uses).
  bool isUnused() const;

private:
  friend class Graph;
  Node(const OpInfo &info, Graph *g) : info_(&info), graph_(g) {}

  const OpInfo *info_;
  Graph *graph_;
  std::vector<Value *> operands_;
  std::vector<std::unique_ptr<Value>> results_;
  std::vector<Attribute> attrs_;
  Location loc_;
  Node *prev_ = nullptr, *next_ = nullptr;
};

/// Iterates a graph's node list; safe against erasing the current node if
/// the caller advances first (use `for (Node *n : g.nodesEarlyInc())`).
class NodeIterator {
public:
  explicit NodeIterator(Node *n) : n_(n) {}
  Node *operator*() const { return n_; }
  NodeIterator &operator++() {
    n_ = n_->next();
    return *this;
  }
  bool operator!=(const NodeIterator &o) const { return n_ != o.n_; }
  bool operator==(const NodeIterator &o) const { return n_ == o.n_; }

private:
  Node *n_;
};

struct NodeRange {
  Node *first;
  NodeIterator begin() const { return NodeIterator(first); }
  NodeIterator end() const { return NodeIterator(nullptr); }
};

class Graph {
public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  ~Graph();
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  Value *addInput(TensorType t, std::string name = "");
  unsigned numInputs() const { return static_cast<unsigned>(inputs_.size()); }
  Value *input(unsigned i) const { return inputs_[i].get(); }
  std::vector<Value *> inputs() const;

  const std::vector<Value *> &outputs() const { return outputs_; }
  void setOutputs(std::vector<Value *> outs);
  void setOutput(unsigned i, Value *v);

  NodeRange nodes() const { return NodeRange{head_}; }
  /// A snapshot of the node list, safe to iterate while erasing.
  std::vector<Node *> nodeList() const;
  Node *front() const { return head_; }
  Node *back() const { return tail_; }
  size_t numNodes() const { return numNodes_; }
  bool empty() const { return numNodes_ == 0; }

  /// Creates a node without checks (the verifier checks later) and inserts
  /// it before `before` (nullptr: at the end). `attrs` are in schema order.
  Node *createNode(const OpInfo &info, std::vector<Value *> operands,
                   std::vector<TensorType> resultTypes, std::vector<Attribute> attrs, Location loc,
                   Node *before = nullptr);
  /// Given:  %a = f(%x); %b = g(%x)   (%a unused)
  /// Call:   g.erase(a_node)
  /// Result: %b = g(%x)
  /// The node's results must have no uses.
  void erase(Node *n);

  /// A deep copy; constants share their tensor bytes.
  std::unique_ptr<Graph> clone() const;

private:
  friend class Node;
  void unlink(Node *n);
  void linkBefore(Node *n, Node *before);

  std::string name_;
  std::vector<std::unique_ptr<Value>> inputs_;
  std::vector<Value *> outputs_;
  Node *head_ = nullptr, *tail_ = nullptr;
  size_t numNodes_ = 0;
};

/// Graphs of one file or model.
class Module {
public:
  std::vector<std::unique_ptr<Graph>> &graphs() { return graphs_; }
  const std::vector<std::unique_ptr<Graph>> &graphs() const { return graphs_; }
  Graph *addGraph(std::unique_ptr<Graph> g) {
    graphs_.push_back(std::move(g));
    return graphs_.back().get();
  }
  /// The graph named `name`, or nullptr.
  Graph *lookup(std::string_view name) const;

private:
  std::vector<std::unique_ptr<Graph>> graphs_;
};

/// Same ops, attributes, types, names and wiring, node by node; locations
/// are compared when `compareLocs`. On a difference, `why` says where.
bool structurallyEqual(const Graph &a, const Graph &b, bool compareLocs = false,
                       std::string *why = nullptr);

} // namespace kiln
