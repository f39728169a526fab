//===- PatternRewriter.h - Local rewrites and the greedy driver -*- C++ -*-===//
//
// A RewritePattern looks at one node and either rewrites the graph around
// it (returning true) or leaves it alone. Patterns mutate the graph only
// through the PatternRewriter, which keeps the driver's worklist up to date
// and enforces the one rule every rewrite obeys: a replacement value has
// exactly the type of the value it replaces.
//
// applyPatternsGreedily runs patterns to a fixpoint:
//   1. Seed a FIFO worklist with every node in graph order.
//   2. Pop a node; try the patterns in table order; the first that matches
//      rewrites.
//   3. A rewrite queues the users of the replacement value, the nodes it
//      created, and the producers of the erased node's operands (their use
//      counts changed), then erases the nodes it made dead.
//   4. Stop when the worklist is empty.
// The order depends only on the graph, never on pointer values, so the
// output is deterministic.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"
#include "ir/Graph.h"

#include <deque>
#include <span>
#include <unordered_set>

namespace kiln {

class PatternRewriter;

/// A local simplification. `matchAndRewrite` returns true iff it changed
/// the graph; it must then have removed `n` (see applyPatternsGreedily for
/// why this guarantees termination).
struct RewritePattern {
  const char *name;
  bool (*matchAndRewrite)(Node *n, PatternRewriter &rewriter);
};

class PatternRewriter {
public:
  explicit PatternRewriter(Graph &g) : graph_(g) {}

  Graph &graph() const { return graph_; }

  /// Creates `kind(operands) {attrs}` right before `before`, at its
  /// location, only if the op's inference accepts it and gives exactly
  /// `expected`; otherwise creates nothing, reports nothing, returns nullptr.
  Value *createIfType(Node *before, OpKind kind, std::vector<Value *> operands,
                      std::vector<NamedAttr> attrs, const TensorType &expected);
  /// Replaces every use of `n`'s single result by `v` (which must have the
  /// same type), erases `n`, then erases producers that died with it.
  void replaceNode(Node *n, Value *v);

  /// Nodes erased so far (including the replaced ones).
  unsigned numErased() const { return numErased_; }

private:
  friend bool applyPatternsGreedily(Graph &, std::span<const RewritePattern>, unsigned &,
                                    unsigned &, unsigned);
  void push(Node *n);
  Node *pop();

  Graph &graph_;
  std::deque<Node *> worklist_;
  /// Nodes queued and not erased; an entry of worklist_ that is not here is
  /// stale (its node was erased) and is skipped.
  std::unordered_set<Node *> queued_;
  /// Nodes this rewriter created (their values take the names of the values
  /// they replace).
  std::unordered_set<const Node *> created_;
  unsigned numErased_ = 0;
};

/// Applies `patterns` until none matches. Every pattern removes the node it
/// matched and creates at most one node while making at least one other die,
/// so each rewrite shrinks the graph and the loop terminates; `maxRewrites`
/// is a backstop against a pattern breaking that rule (returns false, the
/// graph is still valid). Reports the number of rewrites and erased nodes.
bool applyPatternsGreedily(Graph &g, std::span<const RewritePattern> patterns,
                           unsigned &numRewrites, unsigned &numErased, unsigned maxRewrites);

} // namespace kiln
